import FerryCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// The catalog in PostgreSQL, for several `ferry serve` nodes sharing one: videos, images, access keys, the media job
/// queue and the webhook outbox, behind the same protocols as ``SQLiteCatalog`` (``MediaCatalog``, ``JobQueue``,
/// ``WebhookStore``) and held to the same behavioural tests.
///
/// Its connections live in a PostgreSQL client that runs as a ServiceLifecycle `Service` (``run()``): the server's
/// service group runs it, first among its services so it stops last, and queries wait while it does not run. For a
/// catalog used on its own, ``withConnection(url:logger:_:)`` runs it around a closure:
///
/// ```swift
/// let versions = try await PostgresCatalog.withConnection(url: "postgres://ferry@db.internal:5432/ferry") { catalog in
///     try await catalog.schemaVersions()
/// }
/// ```
///
/// Schema migrations run under an advisory lock, so nodes starting together apply each one once; the `ferry_schema`
/// table records what is applied. Jobs are claimed with `FOR UPDATE SKIP LOCKED`.
public final class PostgresCatalog: Sendable, Service {
    let client: PostgresClient
    /// Seals access key secrets at rest; nil keeps them as they are.
    let secrets: SecretBox?
    let logger: Logger
    /// How long an operation waits for a pooled connection (``defaultLeaseTimeout`` unless a test sets another).
    let leaseTimeout: Duration
    /// How long an operation may take in all (``defaultOperationTimeout`` unless a test sets another).
    let operationTimeout: Duration
    /// The operations running on each open connection, each by the way to answer it when the connection closes.
    let running = ConnectionWatch()
    /// Opened once ``run()`` has started the pool: connections are asked for only then (PostgresNIO warns of any earlier).
    let started = OpenOnce()
    /// Until when operations fail at once, without waiting for a connection: set for ``unreachableWindow`` when a
    /// wait for one was given up, cleared when a connection is had.
    let unreachableUntil = NIOLockedValueBox<ContinuousClock.Instant?>(nil)

    /// A catalog URL that cannot be used.
    public struct InvalidURL: Error, CustomStringConvertible {
        /// Why.
        public var description: String

        /// Creates the error.
        package init(description: String) {
            self.description = description
        }
    }

    /// Connection settings read from `postgres://user[:password]@host[:port]/database` (`postgresql://` too).
    public static func configuration(url text: String) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? "")
        else { throw InvalidURL(description: "The catalog URL must look like postgres://user@host:5432/database.") }
        guard let host = components.host, !host.isEmpty else { throw InvalidURL(description: "The catalog URL names no host.") }
        guard let user = components.user, !user.isEmpty else { throw InvalidURL(description: "The catalog URL names no user.") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else { throw InvalidURL(description: "The catalog URL names no database.") }
        if let mode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value, mode != "disable" {
            throw InvalidURL(description: "sslmode=\(mode) is not supported; reach PostgreSQL over a private network.")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 }, database: database, tls: .disable)
        configuration.options.maximumConnections = 20
        return configuration
    }

    /// A catalog for the database at `url`, with access key secrets sealed by `secrets`. Nothing connects until
    /// ``run()`` runs; the schema is migrated by ``withConnection(url:secrets:logger:_:)``.
    package init(
        url: String, secrets: SecretBox?, logger: Logger, leaseTimeout: Duration = defaultLeaseTimeout,
        operationTimeout: Duration = defaultOperationTimeout
    ) throws {
        var configuration = try Self.configuration(url: url)
        // PostgreSQL ends a statement itself a little before the operation's time runs out: one waiting on a lock
        // held elsewhere would otherwise commit after its request was answered 503 (retry), and the retry find it
        // done (412 to a conditional write that won). Migrations, which may wait longer, lift it for themselves.
        let margin = min(Duration.seconds(5), operationTimeout / 4)
        let limit = max(1, Int(((operationTimeout - margin).timeInterval * 1000).rounded()))
        configuration.options.additionalStartupParameters.append(("statement_timeout", String(limit)))
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.secrets = secrets
        self.logger = logger
        self.leaseTimeout = leaseTimeout
        self.operationTimeout = operationTimeout
    }

    /// Runs the catalog's connections until the service group shuts down (or the task is cancelled); then they
    /// close. Runs once per catalog.
    public func run() async {
        let (client, started) = (client, started)
        #if compiler(>=6.2)
        if #available(macOS 26, iOS 26, *) {
            // `PostgresClient.run()` marks the client running before its first suspension; started as an immediate
            // task it takes that step here, before the gate opens, so no lease woken by the gate finds the client not
            // yet running (PostgresNIO would warn).
            await withDiscardingTaskGroup { group in
                group.addImmediateTask { await client.run() }
                started.open()
            }
            return
        }
        #endif
        started.open()
        await client.run()
    }

    /// Connects to the database at `url`, applies pending migrations, and runs `body` with the catalog; its
    /// connections close when `body` returns or throws.
    public static func withConnection<Result>(
        url: String, logger: Logger = Logger(label: "ferry.catalog"), _ body: (PostgresCatalog) async throws -> Result
    ) async throws -> Result {
        try await withConnection(url: url, secrets: nil, logger: logger, body)
    }

    /// Connects, migrates and seals plaintext access key secrets with `secrets`, and runs `body` with the catalog.
    package static func withConnection<Result>(
        url: String, secrets: SecretBox?, logger: Logger, _ body: (PostgresCatalog) async throws -> Result
    ) async throws -> Result {
        let catalog = try PostgresCatalog(url: url, secrets: secrets, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await catalog.run() }
            defer { group.cancelAll() }
            try await catalog.migrate()
            try await catalog.sealPlaintextSecrets(with: secrets)
            return try await body(catalog)
        }
    }

    // MARK: Migrations

    /// Key of the advisory lock migrations run under (any constant no other application on the database uses).
    static let migrationLock: Int64 = 0x4665_7272_7953_6368  // "FerrySch"

    /// Every schema change, in order; a version is applied once, in a transaction of its own.
    static let migrations: [(version: Int, name: String, statements: [String])] = [
        (
            1, "media, access keys, jobs, webhooks",
            [
                """
                CREATE TABLE video (
                    video_id TEXT PRIMARY KEY, record TEXT NOT NULL, status TEXT NOT NULL, cate_id BIGINT, tags TEXT,
                    bucket TEXT NOT NULL, key TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, owner TEXT,
                    client_token TEXT)
                """,
                "CREATE INDEX video_by_object ON video (bucket, key)",
                "CREATE INDEX video_by_status ON video (status, created_at)",
                "CREATE INDEX video_by_owner ON video (owner, created_at)",
                "CREATE INDEX video_by_token ON video (owner, client_token)",
                """
                CREATE TABLE image (
                    image_id TEXT PRIMARY KEY, record TEXT NOT NULL, bucket TEXT NOT NULL, key TEXT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL)
                """,
                "CREATE INDEX image_by_object ON image (bucket, key)",
                """
                CREATE TABLE access_key (
                    id TEXT PRIMARY KEY, secret TEXT NOT NULL, policy TEXT NOT NULL, status TEXT NOT NULL,
                    description TEXT NOT NULL DEFAULT '', created_at DOUBLE PRECISION NOT NULL)
                """,
                """
                CREATE TABLE media_job (
                    id TEXT PRIMARY KEY, video_id TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, run_at DOUBLE PRECISION NOT NULL,
                    lease_owner TEXT, lease_expires_at DOUBLE PRECISION, progress DOUBLE PRECISION, last_error TEXT,
                    created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
                    seq BIGSERIAL NOT NULL)
                """,
                "CREATE INDEX media_job_queued ON media_job (run_at, seq) WHERE state = 'queued'",
                "CREATE INDEX media_job_running ON media_job (lease_expires_at, seq) WHERE state = 'running'",
                "CREATE INDEX media_job_by_video ON media_job (video_id, seq)",
                """
                CREATE TABLE webhook_event (
                    seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, payload TEXT NOT NULL,
                    body BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at DOUBLE PRECISION NOT NULL, delivered_at DOUBLE PRECISION,
                    failed_at DOUBLE PRECISION, last_error TEXT)
                """,
                "CREATE INDEX webhook_event_pending ON webhook_event (seq) WHERE delivered_at IS NULL AND failed_at IS NULL",
            ]
        ),
        (2, "shared server secrets", ["CREATE TABLE server_secret (name TEXT PRIMARY KEY, value BYTEA NOT NULL)"]),
        (
            3, "service leases",
            ["CREATE TABLE service_lease (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)"]
        ),
        (4, "object store", objectTables),
        (5, "blob deletion queue", blobDeletionTable),
        (6, "bucket lifecycle", ["ALTER TABLE s3_bucket ADD COLUMN lifecycle TEXT"]),
        (7, "node heartbeats", nodeHeartbeatTable),
        (
            8, "trace context",
            ["ALTER TABLE media_job ADD COLUMN trace_parent TEXT", "ALTER TABLE webhook_event ADD COLUMN trace_parent TEXT"]
        ),
        (9, "resumable uploads", resumableUploadTable),
        (10, "quotas", quotaMigration),
        (11, "signing keys", signingKeyMigration),
        (
            12, "revoked console sessions",
            ["CREATE TABLE revoked_session (digest TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)"]
        ),
        (13, "resumable uploads by multipart upload", ["CREATE INDEX resumable_upload_by_upload ON resumable_upload (upload_id)"]),
        (
            14, "image status",
            [
                "ALTER TABLE image ADD COLUMN status TEXT",
                "UPDATE image SET status = (record::jsonb)->>'status'",
                "CREATE INDEX image_by_status ON image (status, image_id)",
            ]
        ),
        (
            15, "webhook subjects",
            [
                "ALTER TABLE webhook_event ADD COLUMN subject TEXT",
                """
                UPDATE webhook_event SET subject = coalesce((payload::jsonb)->>'VideoId', (payload::jsonb)->>'ImageId')
                    WHERE delivered_at IS NULL
                """,
                """
                CREATE INDEX webhook_event_pending_by_subject ON webhook_event (subject, seq)
                    WHERE delivered_at IS NULL AND failed_at IS NULL
                """,
            ]
        ),
    ]

    /// Applies pending migrations under the advisory lock; returns the versions it applied.
    @discardableResult
    func migrate() async throws -> [Int] {
        await started.wait()
        return try await client.withConnection { connection in
            // Waiting for another node's migrations, or building an index, may take longer than a statement may.
            try await connection.query("SET statement_timeout = 0", logger: logger)
            try await connection.query("SELECT pg_advisory_lock(\(Self.migrationLock))", logger: logger)
            do {
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS ferry_schema (
                        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)
                    """, logger: logger)
                let applied = Set(
                    try await Self.rows("SELECT version FROM ferry_schema", on: connection, logger: logger).map {
                        try $0.value("version") as Int
                    })
                var done: [Int] = []
                for migration in Self.migrations where !applied.contains(migration.version) {
                    try await connection.withTransaction(logger: logger) { connection in
                        for statement in migration.statements {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.query(
                            """
                            INSERT INTO ferry_schema (version, name, applied_at)
                            VALUES (\(migration.version), \(migration.name), \(Date().timeIntervalSince1970))
                            """, logger: logger)
                    }
                    done.append(migration.version)
                }
                try await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: logger)
                try await connection.query("RESET statement_timeout", logger: logger)
                return done
            } catch {
                do {
                    try await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: logger)
                    try await connection.query("RESET statement_timeout", logger: logger)
                } catch let unlock {
                    // Released anyway when the connection closes.
                    logger.warning(
                        "catalog migration lock not released", metadata: ["error": .string(String(describing: unlock))])
                }
                throw error
            }
        }
    }

    /// The schema versions applied, in order.
    public func schemaVersions() async throws -> [Int] {
        try await rows("SELECT version FROM ferry_schema ORDER BY version").map { try $0.value("version") }
    }

    // MARK: Shared secrets

    /// A secret every node shares, made by the first node that asks (`make`) and read by the others; `created` says
    /// whether this call made it.
    package func sharedSecret(_ name: String, make: () -> Data) async throws -> (value: Data, created: Bool) {
        let candidate = ByteBuffer(bytes: make())
        if let made = try await rows(
            "INSERT INTO server_secret (name, value) VALUES (\(name), \(candidate)) ON CONFLICT DO NOTHING RETURNING value"
        ).first {
            return (Data(buffer: try made.value("value")), true)
        }
        guard let stored = try await rows("SELECT value FROM server_secret WHERE name = \(name)").first else {
            throw InvalidURL(description: "The catalog lost the server secret \(name).")
        }
        return (Data(buffer: try stored.value("value")), false)
    }

    // MARK: Helpers

    /// How long an operation waits for a connection from the pool before it fails with
    /// ``FerryDomainError/Code/storeUnavailable`` (503, retry). While PostgreSQL is down the pool has none to give:
    /// without a limit every request would wait for the whole outage.
    package static let defaultLeaseTimeout: Duration = .seconds(5)

    /// How long an operation may take in all before it fails with ``FerryDomainError/Code/storeUnavailable``: a
    /// statement on a connection PostgreSQL dropped as it stopped can otherwise wait for an answer that never comes.
    /// Longer than any lock the catalog's own transactions hold.
    package static let defaultOperationTimeout: Duration = .seconds(30)

    /// How long after a wait for a connection was given up other operations fail at once: during an outage a request
    /// making several catalog operations waits for one connection, not one per operation.
    static let unreachableWindow: Duration = .seconds(1)

    /// Runs `body` on a connection from the pool, waiting at most ``leaseTimeout`` for one and answering within
    /// ``operationTimeout`` in all. Failing to get a connection, or one PostgreSQL closed or could not open, is
    /// ``FerryDomainError/Code/storeUnavailable``; what `body` throws otherwise is thrown as it is. `body` never
    /// starts once the wait for a connection has been given up. An operation past its time, or whose connection
    /// closes while it runs, is answered at once: its work is cancelled and let go, and whether a write in it was
    /// committed is then unknown (as when a connection breaks during its commit). PostgresNIO never answers a
    /// statement sent on a connection that has closed (PostgreSQL stopping between two statements of a transaction):
    /// without the watch such an operation would wait for its whole time. Within ``unreachableWindow`` of a wait for
    /// a connection given up, an operation fails at once.
    func leased<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws
        -> Result
    {
        let unreachableUntil = unreachableUntil
        if let until = unreachableUntil.withLockedValue({ $0 }), ContinuousClock.now < until { throw Self.unavailable }
        let lease = NIOLockedValueBox(LeaseWait.waiting)
        let (answer, answering) = AsyncThrowingStream<Result, any Error>.makeStream()
        let (client, running) = (client, running)
        // Not a child task: a PostgresNIO call that never returns must not hold its caller.
        let work = Task { [started] in
            do {
                await started.wait()
                let result = try await client.withConnection { connection in
                    let start = lease.withLockedValue { state in
                        guard state == .waiting else { return false }
                        state = .leased
                        return true
                    }
                    guard start else { throw Self.unavailable }
                    unreachableUntil.withLockedValue { $0 = nil }
                    let ended = running.add(connection) { answering.finish(throwing: Self.unavailable) }
                    defer { ended() }
                    return try await body(connection)
                }
                answering.yield(result)
                answering.finish()
            } catch {
                let state = lease.withLockedValue { $0 }
                let answer = Self.answer(for: error, leased: state == .leased)
                // The pool failed before the wait was given up (not a connection had after it).
                if state == .waiting, (answer as? FerryDomainError)?.code == .storeUnavailable {
                    unreachableUntil.withLockedValue { $0 = .now + Self.unreachableWindow }
                }
                answering.finish(throwing: answer)
            }
        }
        let (leaseTimeout, operationTimeout, logger) = (leaseTimeout, operationTimeout, logger)
        let timer = Task {
            try await Task.sleep(for: leaseTimeout)
            let gaveUp = lease.withLockedValue { state in
                guard state == .waiting else { return false }
                state = .givenUp
                return true
            }
            if gaveUp { unreachableUntil.withLockedValue { $0 = .now + Self.unreachableWindow } }
            if !gaveUp {
                try await Task.sleep(for: operationTimeout - leaseTimeout)
                logger.warning("catalog operation not answered in time; answered as unavailable")
            }
            answering.finish(throwing: Self.unavailable)
            work.cancel()
        }
        defer { timer.cancel() }
        do {
            for try await result in answer { return result }
        } catch {
            // Answered before its work ended (its time ran out or its connection closed), or the work threw.
            work.cancel()
            throw error
        }
        // The caller was cancelled.
        work.cancel()
        throw CancellationError()
    }

    /// The operations running on each open connection, so that those of a connection that closes are answered at
    /// once. One close callback is registered per connection (the first time an operation runs on it), not one per
    /// operation: a pooled connection lives for many operations.
    final class ConnectionWatch: Sendable {
        private let operations = NIOLockedValueBox<[PostgresConnection.ID: [UUID: @Sendable () -> Void]]>([:])

        /// Records an operation running on `connection`, answered by `onClose` if the connection closes first;
        /// returns what ends the record.
        func add(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
            let (id, token) = (connection.id, UUID())
            let watched = operations.withLockedValue { operations in
                defer { operations[id, default: [:]][token] = onClose }
                return operations[id] != nil
            }
            if !watched {
                connection.closeFuture.whenComplete { [operations] _ in
                    for answer in operations.withLockedValue({ $0.removeValue(forKey: id) ?? [:] }).values { answer() }
                }
            }
            return { [operations] in _ = operations.withLockedValue { $0[id]?.removeValue(forKey: token) } }
        }
    }

    /// What an operation that failed with `error` answers: a failure of the connection, or of the pool before a
    /// connection was `leased`, is ``FerryDomainError/Code/storeUnavailable``.
    private static func answer(for error: any Error, leased: Bool) -> any Error {
        if let failure = error as? PSQLError, isUnavailable(failure) { return unavailable }
        if !leased, !(error is FerryDomainError) { return unavailable }
        return error
    }

    /// Where an operation's wait for a pooled connection stands; whichever of the lease and the time limit comes
    /// first moves it on from `waiting`, and the other then gives way.
    private enum LeaseWait { case waiting, leased, givenUp }

    /// Whether `error` is a failure of the connection, not of a statement: PostgreSQL is down, restarting or
    /// unreachable. Besides the client's own connection errors, that is a server error of class 08 (connection
    /// exception) or 57P (the server shut down, crashed or is starting up).
    private static func isUnavailable(_ error: PSQLError) -> Bool {
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed: true
        case .server:
            // 57014: the statement ran past `statement_timeout` (its transaction rolled back: nothing was written).
            error.serverInfo?[.sqlState].map { $0.hasPrefix("08") || $0.hasPrefix("57P") || $0 == "57014" } ?? false
        default: false
        }
    }

    private static var unavailable: FerryDomainError {
        FerryDomainError(.storeUnavailable, "The catalog is unavailable; please retry the request.", retryAfterSeconds: 1)
    }

    /// Runs `body` in a transaction (committed when it returns, rolled back when it throws); the error `body` threw is
    /// thrown as it is.
    func transaction<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws
        -> Result
    {
        let logger = logger
        return try await leased { [logger] connection in
            do {
                return try await connection.withTransaction(logger: logger) { connection in try await body(connection) }
            } catch let error as PostgresTransactionError {
                if let thrown = error.closureError { throw thrown }
                if let failure = error.beginError ?? error.commitError ?? error.rollbackError { throw failure }
                throw error
            }
        }
    }

    /// Runs a statement whose rows (if any) are not needed.
    func execute(_ query: PostgresQuery) async throws {
        _ = try await rows(query)
    }

    /// Every row of a query.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        let logger = logger
        return try await leased { [logger] connection in try await Self.rows(query, on: connection, logger: logger) }
    }

    /// Every row of a query on a connection (inside a transaction).
    /// Takes an advisory lock (`query`: `SELECT pg_advisory_xact_lock(…)`) and reads its answer: the wait ends in
    /// that row, or in the error that ended it (past `statement_timeout`: 57014, a 503 its client retries). Unread, the
    /// error would surface at the transaction's next statement as "current transaction is aborted", a 500.
    static func lock(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws {
        for try await _ in try await connection.query(query, logger: logger) {}
    }

    static func rows(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws
        -> [PostgresRandomAccessRow]
    {
        try await connection.query(query, logger: logger).reduce(into: []) { $0.append($1.makeRandomAccess()) }
    }

    /// Whether a query on a connection (inside a transaction) answers any row.
    static func exists(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        !(try await rows(query, on: connection, logger: logger)).isEmpty
    }

    /// The first column of every row, as strings.
    func strings(_ query: PostgresQuery) async throws -> [String] {
        let logger = logger
        return try await leased { [logger] connection in
            try await connection.query(query, logger: logger).decode(String.self).reduce(into: []) { $0.append($1) }
        }
    }

    /// How many rows a statement with `RETURNING` changed.
    func changed(_ query: PostgresQuery) async throws -> Int { try await rows(query).count }

    // MARK: Access keys

    public func accessKey(_ id: String) async throws -> StoredAccessKey? {
        try await rows("SELECT * FROM access_key WHERE id = \(id)").first.map(accessKey)
    }

    public func accessKeys() async throws -> [StoredAccessKey] {
        try await rows("SELECT * FROM access_key ORDER BY created_at, id").map(accessKey)
    }

    public func insertAccessKey(_ key: StoredAccessKey) async throws {
        let policy = String(decoding: try JSONEncoder().encode(key.policy), as: UTF8.self)
        let secret = try secrets?.seal(key.secretAccessKey) ?? key.secretAccessKey
        let quota = try AccessKeyQuotaColumn.encode(key.quota)
        try await execute(
            """
            INSERT INTO access_key (id, secret, policy, status, description, created_at, quota)
            VALUES (\(key.accessKeyId), \(secret), \(policy), \(key.status.rawValue), \(key.description),
                    \(key.createdAt.timeIntervalSince1970), \(quota))
            """)
    }

    public func setAccessKeyQuota(_ id: String, _ quota: AccessKeyQuota) async throws -> Bool {
        let column = try AccessKeyQuotaColumn.encode(quota)
        return try await changed("UPDATE access_key SET quota = \(column) WHERE id = \(id) RETURNING id") > 0
    }

    public func setAccessKeyStatus(_ id: String, _ status: StoredAccessKey.Status) async throws -> Bool {
        return try await changed("UPDATE access_key SET status = \(status.rawValue) WHERE id = \(id) RETURNING id") > 0
    }

    public func revokeSession(_ digest: String, expiration: Date, now: Date) async throws {
        try await transaction { [logger] connection in
            try await connection.query(
                "DELETE FROM revoked_session WHERE expires_at < \(now.timeIntervalSince1970)", logger: logger)
            try await connection.query(
                """
                INSERT INTO revoked_session (digest, expires_at) VALUES (\(digest), \(expiration.timeIntervalSince1970))
                ON CONFLICT (digest) DO NOTHING
                """, logger: logger)
        }
    }

    public func isSessionRevoked(_ digest: String) async throws -> Bool {
        !(try await rows("SELECT 1 AS one FROM revoked_session WHERE digest = \(digest)")).isEmpty
    }

    /// Seals secrets stored before the catalog had a key to seal them with.
    package func sealPlaintextSecrets(with secrets: SecretBox?) async throws {
        guard let secrets else { return }
        for row in try await rows("SELECT id, secret FROM access_key") {
            let (id, stored): (String, String) = (try row.value("id"), try row.value("secret"))
            guard !SecretBox.isSealed(stored) else { continue }
            let sealed = try secrets.seal(stored)
            try await execute("UPDATE access_key SET secret = \(sealed) WHERE id = \(id)")
        }
    }

    private func accessKey(_ row: PostgresRandomAccessRow) throws -> StoredAccessKey {
        let stored: String = try row.value("secret")
        return StoredAccessKey(
            accessKeyId: try row.value("id"), secretAccessKey: try secrets?.open(stored) ?? stored,
            policy: try row.json("policy"),
            status: StoredAccessKey.Status(rawValue: try row.value("status")) ?? .disabled,
            description: try row.value("description"), createdAt: try row.date("created_at"),
            quota: try AccessKeyQuotaColumn.decode(try row.value("quota")))
    }
}

extension PostgresRandomAccessRow {
    /// The value of `column`.
    func value<T: PostgresDecodable>(_ column: String) throws -> T { try self[column].decode(T.self) }

    /// The date `column` holds, in seconds since 1970.
    func date(_ column: String) throws -> Date { Date(timeIntervalSince1970: try value(column)) }

    /// The date `column` holds, in seconds since 1970, or nil when it holds none.
    func optionalDate(_ column: String) throws -> Date? {
        try (value(column) as Double?).map(Date.init(timeIntervalSince1970:))
    }

    /// The JSON document `column` holds, decoded.
    func json<T: Decodable>(_ column: String) throws -> T { try CatalogJSON.decode(T.self, try value(column)) }

    /// The JSON document `column` holds, decoded, or nil when it holds none.
    func optionalJSON<T: Decodable>(_ column: String) throws -> T? {
        try (value(column) as String?).map { try CatalogJSON.decode(T.self, $0) }
    }
}

/// A gate that opens once: what waits for it goes on then, and at once afterwards.
final class OpenOnce: Sendable {
    private let state = NIOLockedValueBox<(isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    /// Opens the gate, letting every waiter go on.
    func open() {
        let waiting = state.withLockedValue { state in
            state.isOpen = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Returns once the gate is open.
    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLockedValue { state in
                if !state.isOpen { state.waiting.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }
}
