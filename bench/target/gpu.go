//go:build cuda

package target

import (
	"fmt"
	"os"
	"runtime"

	"gorgonia.org/cu"

	"github.com/turnwise/turnwise/internal/buildinfo"
)

// describe fills in the GPU's name, driver, the toolkit this binary was
// built with, its L2 cache and memory, and a MemInfo of the device.
func describe(t *Target, ordinal int) error {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if t.Device, err = dev.Name(); err != nil {
		return fmt.Errorf("cuda: device %d's name: %w", ordinal, err)
	}
	if l2, err := dev.Attribute(cu.L2CacheSize); err == nil {
		t.CacheBytes = int64(l2)
	}
	if mem, err := dev.TotalMem(); err == nil {
		t.MemoryBytes = mem
	}
	maj, _ := dev.Attribute(cu.ComputeCapabilityMajor)
	mnr, _ := dev.Attribute(cu.ComputeCapabilityMinor)
	sms, _ := dev.Attribute(cu.MultiprocessorCount)
	t.Device += fmt.Sprintf(" (sm_%d%d, %d SMs)", maj, mnr, sms)
	v := cu.Version()
	t.Driver = fmt.Sprintf("CUDA %d.%d", v/1000, v%1000/10)
	if nv := kernelModuleVersion(); nv != "" {
		t.Driver = nv + ", " + t.Driver
	}
	t.Toolkit = buildinfo.Read().CUDA
	if t.CacheBytes == 0 {
		t.CacheBytes = 50 << 20 // an H100's, the largest the project runs on
		t.Notes = append(t.Notes, "the L2 size could not be read; inputs are rotated past 50 MiB")
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return fmt.Errorf("cuda: device %d's primary context: %w", ordinal, err)
	}
	t.closers = append(t.closers, dev.ReleasePrimaryCtx)
	t.MemInfo = func() (free, total int64, err error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cu.SetCurrentContext(ctx); err != nil {
			return 0, 0, err
		}
		return cu.MemInfo()
	}
	return nil
}

// kernelModuleVersion returns the NVIDIA kernel driver's version from
// /proc/driver/nvidia/version ("580.65.06"), or "".
func kernelModuleVersion() string {
	raw, err := os.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return ""
	}
	return parseDriverVersion(string(raw))
}
