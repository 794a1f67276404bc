// main.cu — runs the emulator self-tests.
//
//   emu_selftest                 every test (not the CHILD bodies); exit 1 on failure
//   emu_selftest NAME...         the named tests
//   emu_selftest --child NAME    one CHILD body (expect_abort starts these)
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "harness.h"

extern char **environ;

std::vector<TestCase> &test_registry() {
	static std::vector<TestCase> r;
	return r;
}

bool &test_failed() {
	static bool f;
	return f;
}

static std::string g_self;

bool expect_abort(const char *name, const std::vector<std::string> &env, const std::vector<std::string> &expect) {
	int fds[2];
	if (pipe(fds) != 0) return false;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	std::vector<std::string> envs(env);
	for (char **e = environ; *e; e++) envs.push_back(*e); // earlier entries win
	std::vector<char *> envp, argv = {(char *)g_self.c_str(), (char *)"--child", (char *)name, nullptr};
	for (auto &s : envs) envp.push_back((char *)s.c_str());
	envp.push_back(nullptr);
	pid_t pid;
	int rc = posix_spawn(&pid, g_self.c_str(), &fa, nullptr, argv.data(), envp.data());
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		fprintf(stderr, "  cannot start %s: %s\n", g_self.c_str(), strerror(rc));
		return false;
	}
	std::string out;
	char buf[4096];
	for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, (size_t)n);
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	bool died = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
	bool ok = died;
	for (auto &s : expect) ok = ok && out.find(s) != std::string::npos;
	if (!ok) {
		fprintf(stderr, "  child %s %s; expected in its stderr:", name, died ? "died" : "did not die");
		for (auto &s : expect) fprintf(stderr, " [%s]", s.c_str());
		fprintf(stderr, "\n  its stderr:\n%s\n", out.c_str());
	}
	return ok;
}

int main(int argc, char **argv) {
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	g_self = n > 0 ? std::string(self, (size_t)n) : std::string(argv[0]);
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		for (auto &t : test_registry())
			if (t.child && strcmp(t.name, argv[2]) == 0) {
				t.fn();
				fprintf(stderr, "child %s returned normally\n", t.name);
				return 0;
			}
		fprintf(stderr, "no child test %s\n", argv[2]);
		return 2;
	}
	int failed = 0, ran = 0;
	for (auto &t : test_registry()) {
		if (t.child) continue;
		bool selected = argc == 1;
		for (int i = 1; i < argc; i++) selected = selected || strcmp(argv[i], t.name) == 0;
		if (!selected) continue;
		ran++;
		test_failed() = false;
		auto t0 = std::chrono::steady_clock::now();
		t.fn();
		double s = seconds_since(t0);
		printf("%s %-28s %7.3f s\n", test_failed() ? "FAIL" : "ok  ", t.name, s);
		fflush(stdout);
		failed += test_failed();
	}
	if (ran == 0) {
		fprintf(stderr, "no test matched\n");
		return 2;
	}
	printf("%d of %d tests failed\n", failed, ran);
	return failed ? 1 : 0;
}
