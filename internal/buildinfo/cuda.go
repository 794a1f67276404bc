//go:build cuda

package buildinfo

// #include <cuda.h>
import "C"

import "fmt"

// cudaToolkit returns the version of the CUDA toolkit whose headers this
// build was compiled against ("12.8").
func cudaToolkit() string {
	v := int(C.CUDA_VERSION)
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
