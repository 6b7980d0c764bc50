// CPU feature detection against the kernel's /proc/cpuinfo flags (Linux), level selection and
// DS_FORCE_ISA, and the C API's ds_isa().
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/error.h"
#include "core/cpu_features.h"
#include "core/dispatch.h"
#include "deepslim/deepslim.h"
#include "harness.h"

namespace {

std::set<std::string> proc_cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// Sets or clears DS_FORCE_ISA for the scope.
struct ForceIsa {
  explicit ForceIsa(const char* value) {
    if (value) setenv("DS_FORCE_ISA", value, 1);
    else unsetenv("DS_FORCE_ISA");
  }
  ~ForceIsa() { unsetenv("DS_FORCE_ISA"); }
};

ds_status status_of_select() {
  try {
    ds::select_kernels();
    return DS_OK;
  } catch (const ds::Error& e) {
    return e.status();
  }
}

}  // namespace

TEST(features_agree_with_proc_cpuinfo) {
#if !defined(__x86_64__) && !defined(_M_X64)
  SKIP("not an x86-64 build (under an emulator /proc/cpuinfo describes the host)");
#endif
  const std::set<std::string> flags = proc_cpu_flags();
  if (flags.empty()) SKIP("no flags line in /proc/cpuinfo (not Linux on x86)");
  const ds::CpuFeatures f = ds::detect_cpu_features();
  // The kernel lists a flag only when the CPU has it and the kernel enabled its state in XCR0.
  CHECK(f.avx2 == (flags.count("avx2") > 0));
  CHECK(f.fma == (flags.count("fma") > 0));
  CHECK(f.avx512f == (flags.count("avx512f") > 0));
  CHECK(f.avx512bw == (flags.count("avx512bw") > 0));
  CHECK(f.avx512dq == (flags.count("avx512dq") > 0));
  CHECK(f.avx512vl == (flags.count("avx512vl") > 0));
  CHECK(f.avx512vnni == (flags.count("avx512_vnni") > 0));
  CHECK(f.avxvnni == (flags.count("avx_vnni") > 0));
  CHECK(!f.avx512f || f.os_zmm);
  std::printf("  avx2=%d fma=%d avx512f=%d bw=%d dq=%d vl=%d avx512vnni=%d avxvnni=%d os_ymm=%d os_zmm=%d\n",
              f.avx2, f.fma, f.avx512f, f.avx512bw, f.avx512dq, f.avx512vl, f.avx512vnni, f.avxvnni,
              f.os_ymm, f.os_zmm);
}

TEST(default_level_is_the_best_available) {
  ForceIsa unset(nullptr);
  const ds::Isa best = ds::best_isa();
  CHECK(ds::isa_available(best));
  CHECK(ds::isa_available(ds::Isa::kScalar));
  for (ds::Isa above : {ds::Isa::kAvx2, ds::Isa::kAvx512})
    if (int(above) > int(best)) CHECK(!ds::isa_available(above));
  CHECK(ds::active_isa() == best);
  CHECK(std::string(ds::select_kernels().isa) == ds::isa_name(best));
  CHECK(std::string(ds_isa()) == ds::isa_name(best));
  CHECK(ds::select_kernels().gemm != nullptr);
  std::printf("  active level: %s (%s)\n", ds_isa(), ds::select_kernels().gemm->name);
}

TEST(force_isa_pins_each_available_level) {
  for (ds::Isa isa : {ds::Isa::kScalar, ds::Isa::kAvx2, ds::Isa::kAvx512}) {
    ForceIsa force(ds::isa_name(isa));
    if (!ds::isa_available(isa)) {
      CHECK(status_of_select() == DS_ERR_INVALID_ARG);
      CHECK(ds_isa() == nullptr);
      continue;
    }
    CHECK(ds::active_isa() == isa);
    CHECK(std::string(ds::select_kernels().isa) == ds::isa_name(isa));
    CHECK(std::string(ds_isa()) == ds::isa_name(isa));
  }
}

TEST(force_isa_rejects_unknown_names) {
  ForceIsa force("avx9000");
  CHECK(status_of_select() == DS_ERR_INVALID_ARG);
  CHECK(ds_isa() == nullptr);
}

TEST(session_creation_fails_on_an_unavailable_forced_level) {
  ForceIsa force("neon");
  bool threw = false;
  try {
    ds::active_isa();
  } catch (const ds::Error& e) {
    threw = e.status() == DS_ERR_INVALID_ARG && e.message().find("DS_FORCE_ISA=neon") != std::string::npos &&
            e.message().find("scalar") != std::string::npos;
  }
  CHECK(threw);
}
