#include "kernels/qu8.h"
namespace ds {
extern const QKernels ds_qkernels__avx512vnni = {"avx512vnni", nullptr, nullptr, nullptr};
}
