import Foundation

/// A device whose clock is wrong: an `LD_PRELOAD` library that moves a process's wall clock (`clock_gettime` of the
/// realtime clocks, `gettimeofday`, `time`) by `FERRY_TEST_CLOCK_OFFSET` seconds, ahead or behind, and leaves every
/// other clock and every wait alone.
///
/// libfaketime moves the deadlines a process gives its timers on the monotonic clock by the offset as well, so on a
/// machine up for less time than the offset (a fresh CI machine, two hours ahead) those timers never fire, and a clock
/// set back puts them off by as much: a retry's wait, and the process, sleep for good.
public enum WallClockShim {
    /// The environment variable the library reads: whole seconds, negative for a clock behind.
    public static let offsetVariable = "FERRY_TEST_CLOCK_OFFSET"

    /// The environment a process runs in with its wall clock `seconds` off: `LD_PRELOAD` (before any the caller set)
    /// and ``offsetVariable``.
    public static func environment(offset seconds: Int, base: [String: String]) throws -> [String: String] {
        var environment = base
        let library = try library.get()
        environment["LD_PRELOAD"] = [library, base["LD_PRELOAD"]].compactMap { $0 }.joined(separator: ":")
        environment[offsetVariable] = String(seconds)
        return environment
    }

    /// The library, compiled once per test process with the toolchain's `clang`.
    private static let library: Result<String, any Error> = Result {
        let directory = TemporaryDirectory.make("ferry-clock-shim")
        let source = directory + "/shim.c"
        let output = directory + "/libferryclockshim.so"
        try Self.source.write(toFile: source, atomically: true, encoding: .utf8)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: try clang())
        compiler.arguments = ["-shared", "-fPIC", "-O1", "-o", output, source, "-ldl"]
        try compiler.run()
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0, FileManager.default.fileExists(atPath: output) else {
            throw ShimError(description: "clang could not build the wall-clock shim (exit \(compiler.terminationStatus))")
        }
        return output
    }

    /// The first `clang` on PATH, else the toolchain's.
    private static func clang() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for folder in path.split(separator: ":").map(String.init) + ["/opt/swift/usr/bin", "/usr/bin"] {
            let candidate = folder + "/clang"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw ShimError(description: "no clang on PATH to build the wall-clock shim")
    }

    /// Why the library could not be made.
    struct ShimError: Error, CustomStringConvertible {
        var description: String
    }

    private static let source = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <stdlib.h>
        #include <sys/time.h>
        #include <time.h>

        static long long offset_seconds(void) {
            static volatile int read = 0;
            static long long seconds = 0;
            if (!read) {
                const char *value = getenv("FERRY_TEST_CLOCK_OFFSET");
                seconds = value ? atoll(value) : 0;
                read = 1;
            }
            return seconds;
        }

        int clock_gettime(clockid_t clock, struct timespec *now) {
            static int (*real)(clockid_t, struct timespec *) = 0;
            if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
            int result = real(clock, now);
            if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
                now->tv_sec += offset_seconds();
            }
            return result;
        }

        int gettimeofday(struct timeval *restrict now, void *restrict zone) {
            (void)zone;
            struct timespec spec;
            int result = clock_gettime(CLOCK_REALTIME, &spec);
            if (result == 0) {
                now->tv_sec = spec.tv_sec;
                now->tv_usec = spec.tv_nsec / 1000;
            }
            return result;
        }

        time_t time(time_t *now) {
            struct timespec spec;
            clock_gettime(CLOCK_REALTIME, &spec);
            if (now) *now = spec.tv_sec;
            return spec.tv_sec;
        }
        """
}
