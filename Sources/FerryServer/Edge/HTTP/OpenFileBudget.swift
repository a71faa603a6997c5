#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How many files the process may hold open, and how many connections fit in them.
///
/// A process that reaches its open-file limit does not only refuse the next connection: the thread pool's monitor
/// (libdispatch) opens a file every second and stops the process when it cannot. So the service raises its limit as far
/// as the system lets it, and takes no more connections than the limit holds, each with the files it may open beside
/// its socket.
public enum OpenFileBudget {
    /// Descriptors kept for what is not a connection: the catalog, logs, the media tools' pipes, listening sockets.
    public static let reserve = 256
    /// Descriptors one connection may hold at once: its socket, a file it writes and one it reads (a copy).
    public static let perConnection = 3

    /// Raises the process's soft limit of open files to its hard limit; the limit then in force (nil when unknown).
    public static func raiseLimit() -> Int? {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #elseif canImport(Musl)
        let resource = Int32(RLIMIT_NOFILE)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return nil }
        var wanted = limit.rlim_max
        #if canImport(Darwin)
        // Darwin refuses a soft limit past OPEN_MAX, even under an unlimited hard one.
        wanted = min(wanted, rlim_t(OPEN_MAX))
        #endif
        if wanted > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = wanted
            // Read back, raised or not: the limit in force is the system's word, not the one asked for.
            _ = setrlimit(resource, &raised)
            guard getrlimit(resource, &limit) == 0 else { return nil }
        }
        // An unlimited limit (RLIM_INFINITY, all ones) clamps to Int.max.
        return Int(clamping: limit.rlim_cur)
    }

    /// The most connections `openFiles` descriptors hold (at least one).
    public static func connections(fitting openFiles: Int) -> Int {
        max(1, (openFiles - reserve) / perConnection)
    }

    /// `limits` with at most the connections `openFiles` descriptors hold; nil when they hold all `limits` allows.
    public static func fitted(_ limits: ConnectionLimits, openFiles: Int) -> ConnectionLimits? {
        let fitting = connections(fitting: openFiles)
        guard limits.maxConnections > fitting else { return nil }
        var fitted = limits
        fitted.maxConnections = fitting
        fitted.maxConnectionsPerAddress = min(limits.maxConnectionsPerAddress, fitting)
        return fitted
    }
}
