# Cross-build for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu; ctest runs the test
# programs under qemu-user (make test-aarch64). No ARM kernels yet: the scalar level runs.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
