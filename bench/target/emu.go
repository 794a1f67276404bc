//go:build cudaemu && !cuda

package target

// describe names the emulator. Its kernels run on the CPU, so there is no
// GPU cache to rotate inputs past, and its times say nothing about a GPU.
func describe(t *Target, _ int) error {
	t.Device = "CUDA kernel emulator on " + cpuModel()
	t.Notes = append(t.Notes, "emulated: the times measure the CPU emulator running the CUDA kernels, not a GPU")
	return nil
}
