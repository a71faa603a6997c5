import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import PostgresNIO
import Testing

@testable import FerryServer
@testable import FerryStorage

extension SharedCatalogTests {
    /// How a query ended.
    enum QueryEnding: Equatable {
        case answered, failed, timedOut
    }

    /// Connections to `url`'s database other than the one asking.
    static func connections(_ url: String) async throws -> Int {
        let database = String(url.split(separator: "/").last ?? "")
        return try await PostgresCatalog.withConnection(url: url) { catalog in
            let rows = try await catalog.rows(
                """
                SELECT count(*)::bigint AS n FROM pg_stat_activity
                WHERE datname = \(database) AND pid <> pg_backend_pid()
                """)
            return Int(try rows.first?["n"].decode(Int64.self) ?? 0)
        }
    }

    @Test("the catalog's connections run as one of the application's services: open while it serves, closed when it stops")
    func catalogConnectionsAreAService() async throws {
        try await PostgresServer.withDatabase { url in
            let server = try await TestServer.with(configure: { $0.catalogURL = url }) { (node: TestServer) async throws -> FerryServer in
                let root = Credentials(accessKeyId: node.root.accessKeyId, secretAccessKey: node.root.secretAccessKey)
                let media = MediaServiceClient(endpoint: URL(string: node.endpoint)!, credentials: root)
                #expect(try await media.listVideos().total == 0)
                #expect(try await Self.connections(url) >= 1)
                return node.server
            }
            // The application's service group has ended: the catalog's connections are closed...
            let deadline = ContinuousClock.now + .seconds(30)
            var open = try await Self.connections(url)
            while open > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                open = try await Self.connections(url)
            }
            #expect(open == 0)
            // ... and a query fails at once instead of waiting for a connection that will not come.
            let ending = await withTaskGroup(of: QueryEnding.self) { group in
                group.addTask {
                    do {
                        _ = try await server.mediaCatalog.video("v1")
                        return .answered
                    } catch {
                        return .failed
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return .timedOut
                }
                let first = await group.next() ?? .timedOut
                group.cancelAll()
                return first
            }
            #expect(ending == .failed)
        }
    }

    @Test(
        "while PostgreSQL is down a request is answered 503 in its dialect (S3 SlowDown, the media API's ServiceUnavailable) with Retry-After, not held for the outage; once it is back the same requests succeed"
    )
    func catalogOutageAnswers503() async throws {
        try await PostgresServer.withServer { postgres, url in
            try await TestServer.with(configure: { $0.catalogURL = url }) { (node: TestServer) async throws in
                var configuration = ObjectStorageClient.Configuration()
                configuration.retryPolicy = RetryPolicy(maxRetryCount: 0)
                let media = QuotaTests.rootMedia(node, configuration: configuration)
                #expect(try await media.listVideos().total == 0)
                // Its objects are in the node's own catalog; the key that signs is looked up in PostgreSQL.
                let key = try await media.createAccessKey(policy: QuotaTests.everything)
                let s3 = node.client(QuotaTests.sigV4(key))
                #expect(try await s3.createBucket("outage").status == 200)

                await postgres.stopServer(mode: "immediate")
                // Each answer below comes while PostgreSQL is still down: it is started again only after them, or by
                // this watchdog after a minute, when a request was held for the outage (which the checks then show).
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(60))
                    try await postgres.startServer()
                }
                // The node's own catalog answers, but it takes no upload: its health says so.
                let health = try await S3TestClient.fetch(node.endpoint + "/_ferry/health")
                #expect(health.status == 503 && health.text == "catalog unavailable\n", "\(health.status) \(health.text)")
                let put = try await s3.put("outage", "during.bin", [1, 2, 3])
                #expect(put.status == 503 && put.errorCode == "SlowDown", "\(put.status) \(put.text)")
                #expect(!put.text.contains("PSQL") && !put.text.contains("127.0.0.1"))
                #expect(put.header("Retry-After") != nil)
                let get = try await s3.get("outage", "during.bin")
                #expect(get.status == 503, "\(get.status) \(get.text)")
                // A form upload token's and a publish signature's key cannot be looked up either: that is not a
                // refusal of the key.
                let form = try await QuotaTests.formUpload(node, key, bucket: "outage", key: "form.bin")
                #expect(form.status == 503 && form.text.contains("ServiceUnavailable"), "\(form.status) \(form.text)")
                #expect(form.header("Retry-After") != nil)
                let now = Int(Date().timeIntervalSince1970)
                let signature = PublishSignature(secretId: key.accessKeyId, currentTimeStamp: now, expireTime: now + 600)
                    .sign(secretKey: key.secretAccessKey)
                let apply = try await s3.sendRaw(
                    "POST", "/_ferry/ugc/ApplyUploadUGC", headers: [("content-type", "application/json")],
                    body: [UInt8](try JSONSerialization.data(withJSONObject: ["signature": signature, "videoType": "mp4"])))
                #expect(apply.status == 503, "\(apply.status) \(apply.text)")
                let uploadToken = UploadToken.make(
                    accessKey: key.accessKeyId, secretKey: key.secretAccessKey,
                    policy: PutPolicy(scope: "outage:tus.bin", deadline: Date().addingTimeInterval(600)))
                let tus = try await S3TestClient.fetchRaw(
                    "POST", node.endpoint + "/_ferry/uploads/",
                    headers: [("Tus-Resumable", "1.0.0"), ("Authorization", "UpToken " + uploadToken), ("Upload-Length", "3")])
                #expect(tus.status == 503 && tus.header("Retry-After") != nil, "\(tus.status) \(tus.text)")
                do {
                    _ = try await media.listVideos()
                    Issue.record("ListVideos answered while PostgreSQL was down")
                } catch let error as FerryError {
                    #expect(error.httpStatus == 503 && error.serverCode == "ServiceUnavailable", "\(error)")
                    #expect(error.retryAfter != nil)
                }

                watchdog.cancel()
                if (try? await watchdog.value) == nil {
                    try await postgres.startServer()
                } else {
                    Issue.record("requests were held until PostgreSQL was started again")
                }
                // The pool reconnects on its own; the first requests after the restart may still meet the outage.
                let deadline = ContinuousClock.now + .seconds(60)
                var after = try await s3.put("outage", "after.bin", [4, 5])
                while after.status == 503, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(250))
                    after = try await s3.put("outage", "after.bin", [4, 5])
                }
                #expect(after.status == 200, "\(after.status) \(after.text)")
                #expect(try await s3.get("outage", "during.bin").status == 404)
                #expect(try await s3.get("outage", "after.bin").body == [4, 5])
                #expect(try await media.listVideos().total == 0)
            }
        }
    }

    @Test(
        "a catalog operation held past its time (its statement waits on a lock) is answered storeUnavailable at its deadline, while the lock is still held, a write so answered is never committed, and the catalog serves again once the lock goes"
    )
    func operationDeadline() async throws {
        try await PostgresServer.withDatabase { url in
            let logger = Logger(label: "ferry.test")
            try await PostgresCatalog.withConnection(url: url) { _ in }
            let catalog = try PostgresCatalog(url: url, secrets: nil, logger: logger, operationTimeout: .seconds(2))
            let holder = try PostgresCatalog(url: url, secrets: nil, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await catalog.run() }
                group.addTask { await holder.run() }
                defer { group.cancelAll() }
                let released = AsyncStream<Void>.makeStream()
                let holding = Task {
                    try await holder.transaction { connection in
                        try await connection.query("LOCK TABLE access_key IN ACCESS EXCLUSIVE MODE", logger: logger)
                        // A key's lock too, as a node stalled mid-write holds it.
                        try await PostgresCatalog.lock(
                            "SELECT pg_advisory_xact_lock(hashtext(\("s3:held" + "\n" + "k")))", on: connection, logger: logger)
                        for await _ in released.stream {}
                    }
                }
                var locked = false
                for _ in 0..<600 where !locked {
                    locked = try await holder.rows(
                        """
                        SELECT 1 FROM pg_locks WHERE relation = 'access_key'::regclass AND mode = 'AccessExclusiveLock'
                        AND granted
                        """
                    ).count == 1
                    if !locked { try await Task.sleep(for: .milliseconds(50)) }
                }
                try #require(locked)
                do {
                    _ = try await catalog.accessKey("FKIAWAITING")
                    Issue.record("answered while the table was locked")
                } catch let error as FerryDomainError {
                    #expect(error.code == .storeUnavailable)
                }
                // A write answered so has not happened, and does not happen once the lock goes: PostgreSQL ended its
                // statement itself (a retry would otherwise find it done).
                let key = StoredAccessKey(
                    accessKeyId: "FKIALATE", secretAccessKey: "secret-late", policy: AccessPolicy(statements: [.init(actions: ["s3:*"])]),
                    status: .active, description: "", createdAt: Date())
                do {
                    try await catalog.insertAccessKey(key)
                    Issue.record("a write answered while the table was locked")
                } catch let error as FerryDomainError {
                    #expect(error.code == .storeUnavailable)
                }
                // A wait for an advisory lock ends the same way: its own error is read (it was left to the next
                // statement, "current transaction is aborted", and answered 500).
                do {
                    _ = try await catalog.deleteObject(bucket: "held", key: "k", condition: .none)
                    Issue.record("answered while the key's lock was held")
                } catch let error as FerryDomainError {
                    #expect(error.code == .storeUnavailable)
                }
                // The lock was still held when those answers came: only now does it go.
                released.continuation.finish()
                try await holding.value
                #expect(try await catalog.accessKey("FKIAWAITING") == nil)
                try await Task.sleep(for: .seconds(1))
                #expect(try await catalog.accessKey("FKIALATE") == nil, "the write answered 503 was committed after all")
            }
        }
    }

    @Test(
        "an operation whose connection PostgreSQL closes between two statements (stopped as a crash would) is answered storeUnavailable at once, not when its time runs out"
    )
    func closedConnectionIsAnsweredAtOnce() async throws {
        try await Self.withRunningCatalog(operationTimeout: .seconds(120)) { postgres, catalog in
            let logger = catalog.logger
            let (began, beginning) = AsyncStream<Void>.makeStream()
            let (stopped, stopping) = AsyncStream<Void>.makeStream()
            let operation = Task {
                try await catalog.transaction { connection in
                    try await connection.query("SELECT 1", logger: logger)
                    beginning.finish()
                    for await _ in stopped {}
                    // PostgresNIO never answers a statement sent on a connection that has closed.
                    try await connection.query("SELECT 2", logger: logger)
                }
            }
            for await _ in began {}
            await postgres.stopServer(mode: "immediate")
            stopping.finish()
            let start = ContinuousClock.now
            do {
                try await operation.value
                Issue.record("answered as done after PostgreSQL stopped")
            } catch let error as FerryDomainError {
                #expect(error.code == .storeUnavailable)
            }
            let waited = ContinuousClock.now - start
            #expect(waited < .seconds(30), "answered after \(waited), the operation's time is 120 s")
        }
    }

    @Test(
        "while PostgreSQL is down, an operation soon after one that waited out its connection wait fails at once (a request's later operations add no wait), and the catalog serves again once it is back"
    )
    func unreachableFailsFast() async throws {
        try await Self.withRunningCatalog(leaseTimeout: .seconds(3)) { postgres, catalog in
            #expect(try await catalog.accessKey("FKIANOKEY") == nil)
            await postgres.stopServer(mode: "immediate")
            let clock = ContinuousClock()
            var codes: [FerryDomainError.Code?] = []
            var times: [Duration] = []
            // Up to three pairs: on a loaded machine the second may start after the first's second of failing at
            // once has passed, and then waits as the first did.
            for _ in 0..<3 where times.count < 2 || times[times.count - 1] >= .milliseconds(1500) {
                codes = []
                times = []
                for _ in 0..<2 {
                    let started = clock.now
                    do {
                        _ = try await catalog.accessKey("FKIANOKEY")
                        codes.append(nil)
                    } catch let error as FerryDomainError {
                        codes.append(error.code)
                    }
                    times.append(clock.now - started)
                }
            }
            #expect(codes == [.storeUnavailable, .storeUnavailable])
            #expect(times[1] < .milliseconds(1500), "the second operation waited \(times[1]) after the first's \(times[0])")
            try await postgres.startServer()
            let deadline = clock.now + .seconds(60)
            var served = false
            while !served, clock.now < deadline {
                do {
                    _ = try await catalog.accessKey("FKIANOKEY")
                    served = true
                } catch {
                    try await Task.sleep(for: .milliseconds(250))
                }
            }
            #expect(served, "the catalog did not serve again within a minute of PostgreSQL's return")
        }
    }

    /// Runs `body` with a PostgreSQL server (to stop and start) and a migrated catalog on it, its client running.
    static func withRunningCatalog(
        leaseTimeout: Duration = PostgresCatalog.defaultLeaseTimeout,
        operationTimeout: Duration = PostgresCatalog.defaultOperationTimeout,
        _ body: (PostgresServer, PostgresCatalog) async throws -> Void
    ) async throws {
        try await PostgresServer.withServer { postgres, url in
            try await PostgresCatalog.withConnection(url: url) { _ in }
            let catalog = try PostgresCatalog(
                url: url, secrets: nil, logger: Logger(label: "ferry.test"), leaseTimeout: leaseTimeout,
                operationTimeout: operationTimeout)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await catalog.run() }
                defer { group.cancelAll() }
                try await body(postgres, catalog)
            }
        }
    }
}
