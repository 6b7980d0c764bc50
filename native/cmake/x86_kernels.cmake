# Sources of the SIMD kernels, their scalar twins and the CPU-feature / thread-pool core, included
# by native/CMakeLists.txt. Every x86 kernel file is compiled with its own ISA's flags only (the
# rest of the library stays at the baseline ISA); src/core/dispatch.cc picks a level at run time
# from cpuid, so one binary runs on any x86-64 CPU.
set(DEEPSLIM_SIMD_SOURCES
  src/core/cpu_features.cc
  src/core/thread_pool.cc
  src/kernels/ref/f32-gemm-pack.cc
  src/kernels/ref/f32-gemm-scalar.cc
  src/kernels/ref/f32-dwconv3x3-scalar.cc
  src/kernels/ref/f32-winograd-scalar.cc)

set(DEEPSLIM_X86_AVX2_SOURCES
  src/kernels/x86/f32-gemm-6x16-avx2.cc
  src/kernels/x86/f32-maxpool2d-avx2.cc
  src/kernels/x86/f32-vbinary-avx2.cc
  src/kernels/x86/f32-activation-avx2.cc
  src/kernels/x86/f32-gemv-avx2.cc
  src/kernels/x86/f32-gavgpool-avx2.cc
  src/kernels/x86/f32-dwconv3x3-avx2.cc
  src/kernels/x86/f32-winograd-avx2.cc
  src/kernels/x86/qs8-gemm-avx2.cc
  src/kernels/x86/q16-gemm-avx2.cc)
set(DEEPSLIM_X86_AVXVNNI_SOURCES
  src/kernels/x86/qs8-gemm-avxvnni.cc)
set(DEEPSLIM_X86_AVX512VNNI_SOURCES
  src/kernels/x86/qs8-gemm-avx512vnni.cc
  src/kernels/x86/q16-gemm-avx512vnni.cc)
set(DEEPSLIM_X86_AVX512_SOURCES
  src/kernels/x86/f32-gemm-12x32-avx512.cc
  src/kernels/x86/f32-vbinary-avx512.cc
  src/kernels/x86/f32-activation-avx512.cc
  src/kernels/x86/f32-gemv-avx512.cc
  src/kernels/x86/f32-gavgpool-avx512.cc
  src/kernels/x86/f32-softmax-avx512.cc
  src/kernels/x86/f32-dwconv3x3-avx512.cc
  src/kernels/x86/f32-winograd-avx512.cc
  src/kernels/x86/f32-maxpool2d-avx512.cc
  src/kernels/x86/q16-gemm-avx512.cc)

set(DEEPSLIM_X86_KERNELS OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(DEEPSLIM_X86_KERNELS ON)
  set_source_files_properties(${DEEPSLIM_X86_AVX2_SOURCES} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  set_source_files_properties(${DEEPSLIM_X86_AVXVNNI_SOURCES} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mavxvnni")
  set_source_files_properties(${DEEPSLIM_X86_AVX512_SOURCES} PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mavx2;-mfma")
  set_source_files_properties(${DEEPSLIM_X86_AVX512VNNI_SOURCES} PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mavx512vnni;-mavx2;-mfma")
  list(APPEND DEEPSLIM_SIMD_SOURCES ${DEEPSLIM_X86_AVX2_SOURCES} ${DEEPSLIM_X86_AVXVNNI_SOURCES} ${DEEPSLIM_X86_AVX512_SOURCES}
       ${DEEPSLIM_X86_AVX512VNNI_SOURCES})
  # Tells src/core/dispatch.cc that the x86 tables exist.
  set_source_files_properties(src/core/dispatch.cc PROPERTIES COMPILE_DEFINITIONS DEEPSLIM_X86_KERNELS=1)
endif()
