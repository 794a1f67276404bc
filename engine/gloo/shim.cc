// shim.cc — Gloo behind the C functions of gloo.h: a TCP device, a context
// connected in a full mesh through our store, and the collectives of
// engine.Communicator over host memory. Contracts: gloo.h and
// engine.Communicator. Every entry point catches what Gloo throws and
// returns it as an error message.

#include "gloo.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

namespace {

void set_err(char *err, size_t errlen, const std::string &msg) {
	if (errlen == 0) return;
	size_t n = msg.size() < errlen - 1 ? msg.size() : errlen - 1;
	memcpy(err, msg.data(), n);
	err[n] = 0;
}

// GoStore is gloo's store interface over the Go side's engine.Store.
class GoStore : public gloo::rendezvous::Store {
  public:
	GoStore(uintptr_t h, std::chrono::milliseconds timeout) : h_(h), timeout_(timeout) {}

	void set(const std::string &key, const std::vector<char> &data) override {
		char err[512];
		if (tw_gloo_store_set(h_, const_cast<char *>(key.data()), key.size(), const_cast<char *>(data.data()),
		                      data.size(), err, sizeof err) != 0)
			throw std::runtime_error(err);
	}

	std::vector<char> get(const std::string &key) override {
		char err[512];
		char *val = nullptr;
		size_t n = 0;
		if (tw_gloo_store_get(h_, const_cast<char *>(key.data()), key.size(), &val, &n, err, sizeof err) != 0)
			throw std::runtime_error(err);
		std::vector<char> out(val, val + n);
		free(val);
		return out;
	}

	void wait(const std::vector<std::string> &keys) override { wait(keys, timeout_); }

	void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override {
		std::string joined;
		for (size_t i = 0; i < keys.size(); i++) {
			if (i > 0) joined.push_back('\0');
			joined += keys[i];
		}
		char err[512];
		if (tw_gloo_store_wait(h_, const_cast<char *>(joined.data()), joined.size(), timeout.count(), err,
		                       sizeof err) != 0)
			throw std::runtime_error(err);
	}

  private:
	uintptr_t h_;
	std::chrono::milliseconds timeout_;
};

// bf16_sum: c = a + b element-wise in bf16 (each sum computed in f32 and
// rounded to nearest even once, as a bf16 addition is). NaN stays NaN.
void bf16_sum(void *c_, const void *a_, const void *b_, size_t n) {
	auto *c = static_cast<uint16_t *>(c_);
	auto *a = static_cast<const uint16_t *>(a_);
	auto *b = static_cast<const uint16_t *>(b_);
	for (size_t i = 0; i < n; i++) {
		uint32_t ua = uint32_t(a[i]) << 16, ub = uint32_t(b[i]) << 16;
		float fa, fb;
		memcpy(&fa, &ua, 4);
		memcpy(&fb, &ub, 4);
		float s = fa + fb;
		uint32_t u;
		memcpy(&u, &s, 4);
		if ((u & 0x7fffffffu) > 0x7f800000u) {
			c[i] = uint16_t((u >> 16) | 0x40); // quiet NaN
		} else {
			c[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
		}
	}
}

void f32_sum(void *c, const void *a, const void *b, size_t n) {
	gloo::sum<float>(c, a, b, n);
}

}  // namespace

struct tw_gloo {
	std::shared_ptr<gloo::rendezvous::Context> ctx;
	uint32_t tag = 0;
};

extern "C" {

tw_gloo *tw_gloo_connect(int rank, int size, const char *hostname, const char *iface, uintptr_t store,
                         int64_t timeout_ms, char *err, size_t errlen) {
	try {
		gloo::transport::tcp::attr attr;
		if (iface != nullptr && iface[0] != 0) {
			attr.iface = iface;
		} else {
			attr.hostname = hostname;
		}
		auto dev = gloo::transport::tcp::CreateDevice(attr);
		auto timeout = std::chrono::milliseconds(timeout_ms);
		GoStore st(store, timeout);
		auto g = new tw_gloo;
		g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
		g->ctx->setTimeout(timeout);
		try {
			g->ctx->connectFullMesh(st, dev);
		} catch (...) {
			delete g;
			throw;
		}
		return g;
	} catch (const std::exception &e) {
		set_err(err, errlen, e.what());
	} catch (...) {
		set_err(err, errlen, "unknown exception");
	}
	return nullptr;
}

void tw_gloo_free(tw_gloo *g) { delete g; }

#define TW_GLOO_TRY(body)                                  \
	try {                                                  \
		body;                                              \
		return 0;                                          \
	} catch (const std::exception &e) {                    \
		set_err(err, errlen, e.what());                    \
	} catch (...) {                                        \
		set_err(err, errlen, "unknown exception");         \
	}                                                      \
	return -1;

int tw_gloo_allreduce(tw_gloo *g, void *buf, size_t n, int dtype, char *err, size_t errlen) {
	TW_GLOO_TRY({
		gloo::AllreduceOptions opts(g->ctx);
		opts.setTag(g->tag++);
		if (dtype == TW_GLOO_BF16) {
			opts.setOutput(static_cast<uint16_t *>(buf), n);
			opts.setReduceFunction(bf16_sum);
		} else {
			opts.setOutput(static_cast<float *>(buf), n);
			opts.setReduceFunction(f32_sum);
		}
		opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
		gloo::allreduce(opts);
	})
}

int tw_gloo_reduce_scatter(tw_gloo *g, void *out, const void *in, size_t n, int dtype, char *err, size_t errlen) {
	// Gloo has no reduce-scatter of this form: all-reduce a copy of the
	// whole input and keep this rank's block, as PyTorch's Gloo group does.
	TW_GLOO_TRY({
		size_t esize = dtype == TW_GLOO_BF16 ? 2 : 4;
		size_t total = n * size_t(g->ctx->size);
		std::vector<char> tmp(static_cast<const char *>(in), static_cast<const char *>(in) + total * esize);
		if (tw_gloo_allreduce(g, tmp.data(), total, dtype, err, errlen) != 0) return -1;
		memcpy(out, tmp.data() + size_t(g->ctx->rank) * n * esize, n * esize);
	})
}

int tw_gloo_allgather(tw_gloo *g, void *out, const void *in, size_t nbytes, char *err, size_t errlen) {
	TW_GLOO_TRY({
		gloo::AllgatherOptions opts(g->ctx);
		opts.setTag(g->tag++);
		opts.setInput(const_cast<uint8_t *>(static_cast<const uint8_t *>(in)), nbytes);
		opts.setOutput(static_cast<uint8_t *>(out), nbytes * size_t(g->ctx->size));
		gloo::allgather(opts);
	})
}

int tw_gloo_broadcast(tw_gloo *g, void *buf, size_t nbytes, int root, char *err, size_t errlen) {
	TW_GLOO_TRY({
		gloo::BroadcastOptions opts(g->ctx);
		opts.setTag(g->tag++);
		opts.setOutput(static_cast<uint8_t *>(buf), nbytes);
		opts.setRoot(root);
		gloo::broadcast(opts);
	})
}

int tw_gloo_barrier(tw_gloo *g, char *err, size_t errlen) {
	TW_GLOO_TRY({
		gloo::BarrierOptions opts(g->ctx);
		opts.setTag(g->tag++);
		gloo::barrier(opts);
	})
}

}  // extern "C"
