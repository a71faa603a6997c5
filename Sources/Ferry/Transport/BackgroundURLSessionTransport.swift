import FerryCore
import FerryTransport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends request bodies from files with a background `URLSession`, so upload parts go on while an iOS app is
/// suspended and are found again after the system relaunches it.
///
/// A background session uploads only from files, so every PUT or POST that carries a body (upload parts, single
/// PUTs, CompleteMultipartUpload, form posts) is first written to a spool file (mode 0600, one chunk at a time for a
/// ``StreamedBody``) in ``spoolDirectory`` and uploaded from there; the file is deleted when the task ends, whether it
/// succeeded, failed or was cancelled. Every other request (GET, HEAD, DELETE, requests without a body) goes through a
/// foreground ``URLSessionTransport`` the transport owns.
///
/// Each background task carries the request's key, its method and URL, which for a part (`…?partNumber=N&uploadId=U`)
/// is the same before and after a relaunch, since Ferry signs in headers. A small ledger in the spool directory
/// records which spool file each task uploads from and, for a task that completes while nobody in this process awaits
/// it, the answer: status, response headers (the part's ETag and checksums) and body. No request header is stored.
/// When the engine, resumed from its checkpoint, sends that part again, ``send(_:bodyProgress:responseSink:)`` returns
/// the recorded answer instead of uploading the part twice; when the part's task is still running, it awaits that
/// task instead of starting another. Only requests of a multipart upload (whose URL names its upload id) are answered
/// so; a PUT of a whole object is always sent, since the same URL may then carry other bytes. (ListParts, which the engine runs when it resumes, remains the authority on
/// what the server holds.)
///
/// On Apple platforms the session is `URLSessionConfiguration.background(withIdentifier:)` and launches the app for
/// its events; forward them with ``handleEventsForBackgroundURLSession(identifier:completionHandler:)``. On Linux,
/// where FoundationNetworking has no background daemon, the session is an ordinary one running the same code: upload
/// tasks from spool files, the ledger, the routing of callbacks.
///
/// ```swift
/// let spool = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
///     .appendingPathComponent("FerrySpool")
/// var configuration = ObjectStorageClient.Configuration()
/// configuration.transport = try BackgroundURLSessionTransport(
///     identifier: "com.example.app.uploads", spoolDirectory: spool)
/// let client = ObjectStorageClient(endpoint: endpoint, credentials: credentials, configuration: configuration)
/// ```
///
/// Create one transport per identifier and spool directory in a process, early in the app's launch, and keep it:
/// Apple platforms allow one session per background identifier, and the transport owns every file in its spool
/// directory that ends in `.body`.
public final class BackgroundURLSessionTransport: HTTPTransport {
    /// Settings of a background transport.
    public struct Configuration: Sendable {
        /// Most connections to one host at a time. Default 6.
        public var maximumConnectionsPerHost: Int = 6
        /// Largest response body kept for an answer nobody in the process awaited; an answer with a larger body is
        /// not kept and the request is sent again when asked for. Default 64 KiB (S3 part answers are empty).
        public var maximumKeptAnswerSize: Int = 64 * 1024
        /// How long an answer nobody asked for again is kept before it is dropped when a transport is created.
        /// Default 7 days.
        public var keptAnswerLifetime: Duration = .seconds(7 * 24 * 3600)
        /// Whether uploads may use a cellular network. Default true.
        public var allowsCellularAccess: Bool = true

        /// The defaults.
        public init() {}
    }

    /// The background session's identifier.
    public let identifier: String
    /// Where request bodies are spooled and the ledger is kept.
    public let spoolDirectory: URL
    /// The settings the transport was created with.
    public let configuration: Configuration

    private let session: URLSession
    private let delegate: BackgroundSessionDelegate
    private let ledger: BackgroundTaskLedger
    private let foreground: URLSessionTransport
    private let restoration = BackgroundRestoration()

    /// Creates a transport with its background session.
    ///
    /// Answers kept longer than ``Configuration/keptAnswerLifetime`` are dropped, and spool files no ledger entry
    /// names are deleted. Spool files of tasks the ledger says were running but which the session no longer has are
    /// deleted with their entries when the first request is sent, once the session has listed its tasks.
    ///
    /// - Parameters:
    ///   - identifier: the background session's identifier; the same in every launch of the app.
    ///   - spoolDirectory: a directory of the transport's own, created (mode 0700) if missing; the same in every
    ///     launch. Somewhere the app keeps, such as Application Support, not Caches.
    ///   - configuration: the settings.
    /// - Throws: ``FerryError`` when the spool directory cannot be created.
    public init(identifier: String, spoolDirectory: URL, configuration: Configuration = Configuration()) throws {
        do {
            try FileManager.default.createDirectory(
                at: spoolDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw FerryError(.invalidArgument, "The spool directory \(spoolDirectory.path) cannot be created: \(error)")
        }
        self.identifier = identifier
        self.spoolDirectory = spoolDirectory
        self.configuration = configuration
        ledger = BackgroundTaskLedger(directory: spoolDirectory)
        ledger.removeAnswers(before: Date() - configuration.keptAnswerLifetime.timeInterval)
        ledger.removeUnreferencedFiles()
        delegate = BackgroundSessionDelegate(ledger: ledger, maximumKeptBodySize: configuration.maximumKeptAnswerSize)

        #if canImport(Darwin)
        let sessionConfiguration = URLSessionConfiguration.background(withIdentifier: identifier)
        sessionConfiguration.sessionSendsLaunchEvents = true
        sessionConfiguration.isDiscretionary = false
        #else
        let sessionConfiguration = URLSessionConfiguration.default
        #endif
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.urlCache = nil
        sessionConfiguration.httpShouldSetCookies = false
        sessionConfiguration.httpMaximumConnectionsPerHost = configuration.maximumConnectionsPerHost
        sessionConfiguration.allowsCellularAccess = configuration.allowsCellularAccess
        session = URLSession(configuration: sessionConfiguration, delegate: delegate, delegateQueue: nil)
        foreground = URLSessionTransport()
    }

    deinit {
        restoration.cancel()
        session.finishTasksAndInvalidate()
    }

    /// Sends a request: one with a body from a spool file through the background session (or answered from the
    /// ledger, or by a task already running for it), any other through the foreground session.
    ///
    /// - Parameters:
    ///   - request: the signed request.
    ///   - bodyProgress: called with the number of body bytes handed to the network since the last call; an answer
    ///     from the ledger counts the whole body as sent, and a task joined counts what it had sent already.
    ///   - responseSink: when given, receives a successful (2xx) response body instead of the response.
    /// - Throws: `CancellationError` when the calling task is cancelled (the session's task is cancelled with it),
    ///   ``TransportError`` when the request fails below HTTP (``TransportError/isTimeout`` when it ran out of time),
    ///   or the error writing the spool file.
    public func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        guard Self.goesInBackground(request) else {
            return try await foreground.send(request, bodyProgress: bodyProgress, responseSink: responseSink)
        }
        guard let url = URL(string: request.url) else {
            throw TransportError("The request URL is not valid.")
        }
        await restoration.run { [session, delegate, ledger] in
            await Self.restore(session: session, delegate: delegate, ledger: ledger)
        }
        let key = Self.key(for: request)
        // Only requests of a multipart upload are answered from the ledger or joined to a running task: their URL
        // names the upload id, which a resumed upload keeps only while its file is unchanged. A PUT of a whole
        // object to the same URL may carry other bytes than the one that finished earlier, so it is always sent.
        while Self.isPartOfMultipartUpload(request) {
            try Task.checkCancellation()
            if let answer = ledger.takeAnswer(key: key) {
                if request.bodyLength > 0 { bodyProgress(Int(request.bodyLength)) }
                return try await Self.deliver(answer.response, to: responseSink)
            }
            guard let task = delegate.task(forKey: key) else { break }
            do {
                let (response, data) = try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        if !delegate.join(task, progress: bodyProgress, continuation: continuation) {
                            continuation.resume(throwing: TaskAlreadyEnded())
                        }
                    }
                } onCancel: {
                    task.cancel()
                }
                return try await Self.deliver(Self.response(response, data), to: responseSink)
            } catch is TaskAlreadyEnded {
                // It completed between the look-up and the join: its answer, if kept, is in the ledger now.
                continue
            }
        }

        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = request.timeout.timeInterval
        for header in request.headers where header.name.lowercased() != "host" {
            urlRequest.addValue(header.value, forHTTPHeaderField: header.name)
        }
        let spoolName = UUID().uuidString + BackgroundTaskLedger.spoolSuffix
        do {
            try await Self.spool(request, to: spoolDirectory.appendingPathComponent(spoolName))
            try Task.checkCancellation()
            try ledger.begin(key: key, spoolFile: spoolName)
        } catch {
            ledger.removeFile(spoolName)
            throw error
        }
        let task = session.uploadTask(with: urlRequest, fromFile: spoolDirectory.appendingPathComponent(spoolName))
        task.taskDescription = key
        let (response, data) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                delegate.start(task, key: key, spoolFile: spoolName, progress: bodyProgress, continuation: continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        return try await Self.deliver(Self.response(response, data), to: responseSink)
    }

    /// How many background upload tasks this transport started.
    var backgroundTasksStarted: Int { delegate.startedTaskCount }

    #if canImport(Darwin)
    /// Takes the completion handler the system passes when it launches or wakes the app for this transport's
    /// background session, and calls it on the main queue once the session has delivered all its events.
    ///
    /// Call it from `application(_:handleEventsForBackgroundURLSession:completionHandler:)` after creating the
    /// transport (with the same identifier and spool directory as before):
    ///
    /// ```swift
    /// func application(
    ///     _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    ///     completionHandler: @escaping () -> Void
    /// ) {
    ///     uploads.transport.handleEventsForBackgroundURLSession(
    ///         identifier: identifier, completionHandler: completionHandler)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - identifier: the identifier the system names; the handler is only taken when it is this transport's.
    ///   - completionHandler: the system's completion handler.
    /// - Returns: whether `identifier` is this transport's (and the handler was taken).
    @MainActor
    @discardableResult
    public func handleEventsForBackgroundURLSession(
        identifier: String, completionHandler: @escaping () -> Void
    ) -> Bool {
        guard identifier == self.identifier else { return false }
        delegate.backgroundEvents.hold(completionHandler)
        return true
    }
    #endif

    /// Whether a request goes through the background session: a PUT or POST with a body.
    static func goesInBackground(_ request: TransportRequest) -> Bool {
        (request.method == "PUT" || request.method == "POST")
            && (request.streamedBody != nil || request.bodyLength > 0)
    }

    /// Whether the request belongs to one multipart upload (an upload part or a completion: its query names the upload
    /// id), so an answer to the same request is an answer for the same bytes.
    static func isPartOfMultipartUpload(_ request: TransportRequest) -> Bool {
        guard let query = URLComponents(string: request.url)?.percentEncodedQueryItems else { return false }
        return query.contains { $0.name == "uploadId" && !($0.value ?? "").isEmpty }
    }

    /// The request's key, also its task's `taskDescription`: the method, a space and the URL.
    static func key(for request: TransportRequest) -> String {
        request.method + " " + request.url
    }

    /// Writes the request's body to `file` (created with mode 0600): a streamed body one chunk at a time, so memory
    /// stays at one chunk, a body buffer at once.
    static func spool(_ request: TransportRequest, to file: URL) async throws {
        guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw TransportError(
                "A spool file for the request body cannot be created in \(file.deletingLastPathComponent().path).")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        if let streamed = request.streamedBody {
            for try await chunk in streamed.chunks {
                try handle.write(contentsOf: chunk)
            }
        } else if let buffer = request.bodyBuffer {
            try buffer.withUnsafeBytes { try handle.write(contentsOf: $0) }
        }
    }

    /// Learns the tasks the session still runs from an earlier process, and drops the ledger's running entries (and
    /// their spool files) whose task is gone.
    private static func restore(
        session: URLSession, delegate: BackgroundSessionDelegate, ledger: BackgroundTaskLedger
    ) async {
        let tasks: [URLSessionTask] = await withCheckedContinuation { continuation in
            session.getAllTasks { continuation.resume(returning: $0) }
        }
        let running = delegate.learn(tasks)
        for file in ledger.removeRunning(except: running) {
            ledger.removeFile(file)
        }
    }

    /// A transport response from a session's.
    private static func response(_ response: HTTPURLResponse, _ data: Data) -> TransportResponse {
        TransportResponse(
            status: response.statusCode, headers: BackgroundSessionDelegate.headers(of: response), body: [UInt8](data))
    }

    /// Hands a 2xx body to `sink`, when there is one, instead of returning it.
    private static func deliver(
        _ response: TransportResponse, to sink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        guard let sink, (200..<300).contains(response.status) else { return response }
        try await sink(response.body)
        return TransportResponse(status: response.status, headers: response.headers, body: [])
    }
}

/// The task a request meant to join had already completed.
private struct TaskAlreadyEnded: Error {}

/// Runs a transport's restoration once, when the first request needs it; every request waits for it to end.
///
/// `@unchecked Sendable`: `task` is only read and written while holding `lock`.
private final class BackgroundRestoration: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Void, Never>?

    /// Starts `body` unless it was started before, and waits for it.
    func run(_ body: @escaping @Sendable () async -> Void) async {
        let restoration = lock.withLock {
            if let task { return task }
            let started = Task { await body() }
            task = started
            return started
        }
        await restoration.value
    }

    /// Cancels the restoration, if it runs.
    func cancel() {
        lock.withLock { task }?.cancel()
    }
}
