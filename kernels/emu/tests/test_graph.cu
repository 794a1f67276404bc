// test_graph.cu — stream capture and graph replay: what a capture keeps, that
// a replay reads the buffers as they are when it runs, and the calls that
// invalidate a capture.
#include <vector>

#include "../../common.cuh"
#include "harness.h"

// y[i] = a·x[i] + *b: b is read on the device, so a replay sees its value then.
__global__ void axpb(float *y, const float *x, float a, const float *b, int n) {
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + *b;
}

TEST(graph_capture_replay) {
	const int n = 100;
	DeviceBuf<float> x(n), y(n), z(n), b(1);
	std::vector<float> xv(n);
	for (int i = 0; i < n; i++) xv[i] = (float)i;
	x.upload(xv);
	b.upload({1.0f});
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureStatus st;
	CUDA_OK(cudaStreamIsCapturing(s, &st));
	CHECK(st == cudaStreamCaptureStatusActive);
	CUDA_OK(cudaMemsetAsync(z.p, 0, n * sizeof(float), s));
	LAUNCH(1, 128, 0, s, axpb)(y.p, x.p, 2.0f, b.p, n);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpyAsync(z.p, y.p, n / 2 * sizeof(float), cudaMemcpyDeviceToDevice, s));
	cudaGraph_t g;
	CUDA_OK(cudaStreamEndCapture(s, &g));
	CUDA_OK(cudaStreamIsCapturing(s, &st));
	CHECK(st == cudaStreamCaptureStatusNone);
	// Nothing ran during the capture: y and z are as cudaMalloc left them.
	CUDA_OK(cudaMemset(y.p, 0, n * sizeof(float)));
	cudaGraphExec_t e;
	CUDA_OK(cudaGraphInstantiateWithFlags(&e, g, 0));
	CUDA_OK(cudaGraphDestroy(g)); // the instantiated graph stands alone
	for (float bv : {1.0f, -3.0f}) {
		b.upload({bv});
		CUDA_OK(cudaGraphLaunch(e, s));
		CUDA_OK(cudaStreamSynchronize(s));
		std::vector<float> yv = y.download(), zv = z.download();
		for (int i = 0; i < n; i++) {
			CHECKF(yv[i] == 2.0f * i + bv, "y[%d] = %g with b = %g", i, yv[i], bv);
			CHECKF(zv[i] == (i < n / 2 ? yv[i] : 0.0f), "z[%d] = %g", i, zv[i]);
		}
	}
	CUDA_OK(cudaGraphExecDestroy(e));
	CUDA_OK(cudaStreamDestroy(s));
}

TEST(graph_capture_invalidated) {
	DeviceBuf<float> x(16), b(1);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	fprintf(stderr, "  (three capture errors are expected here)\n");
	// Synchronising the capturing stream.
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	LAUNCH(1, 16, 0, s, axpb)(x.p, x.p, 1.0f, b.p, 16);
	CHECK(cudaStreamSynchronize(s) != cudaSuccess);
	cudaGetLastError();
	cudaGraph_t g = nullptr;
	CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
	CHECK(g == nullptr);
	cudaGetLastError();
	// A copy from the host on it.
	float h = 1;
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CHECK(cudaMemcpyAsync(b.p, &h, sizeof h, cudaMemcpyHostToDevice, s) != cudaSuccess);
	cudaGetLastError();
	CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
	cudaGetLastError();
	// An allocation while it captures.
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	void *p = nullptr;
	CHECK(cudaMalloc(&p, 64) != cudaSuccess);
	cudaGetLastError();
	CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
	cudaGetLastError();
	// The stream works as before.
	LAUNCH(1, 16, 0, s, axpb)(x.p, x.p, 1.0f, b.p, 16);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamSynchronize(s));
	// Capturing the legacy stream, or ending a capture never begun.
	CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) != cudaSuccess);
	cudaGetLastError();
	CHECK(cudaStreamEndCapture(s, &g) != cudaSuccess);
	cudaGetLastError();
	CUDA_OK(cudaStreamDestroy(s));
}
