#include "kernels/qu8.h"
namespace ds {
extern const QKernels ds_qkernels__avx2 = {"avx2", nullptr, nullptr, nullptr};
}
