// cuda_runtime.h — stand-in for the CUDA toolkit header of that name when .cu files
// are compiled with g++ against the kernel emulator (see tw_emu.h). The
// emulator's include directory must come first on the include path.
#pragma once
#include "tw_emu.h"
