import Foundation

/// Sends one file as one resumable stream to a Ferry upload resource (`/_ferry/uploads/`), speaking tus 1.0 or the
/// IETF resumable-upload draft: for networks and proxies that carry one long request better than many parallel parts.
///
/// The upload is created at a creation URL — a media `ResumableUploadURL` (``MediaServiceClient/UploadTicket/resumableUploadURL``),
/// or `/_ferry/uploads/s3/<bucket>/<key>` signed with a ``SigV4Signer`` — and then appended to at its own URL, which
/// needs no credential. After a failure the uploader asks the server for the upload's offset and goes on from there,
/// up to ``retryPolicy``'s retries in a row; ``upload(file:creationURL:signer:resuming:onCreated:progress:)`` resumes
/// an upload another process started when given its URL.
///
/// ```swift
/// let ticket = try await media.createUploadVideo(.init(title: "Holiday", fileName: "holiday.mp4"))
/// let uploader = StreamUploader(protocol: .tus)
/// let result = try await uploader.upload(file: movie, creationURL: ticket.resumableUploadURL!)
/// ```
public struct StreamUploader: Sendable {
    /// The protocol spoken.
    public enum WireProtocol: String, Sendable, CaseIterable {
        /// tus 1.0.0: an empty creation `POST`, then `PATCH`es of ``StreamUploader/chunkSize`` bytes, each with the
        /// SHA-1 of its bytes (`Upload-Checksum`): a chunk damaged on its way is refused by the server (460, nothing of
        /// it kept) and sent again.
        case tus
        /// The IETF draft (interop version 6): an empty creation, then one append of everything left. The draft has
        /// no checksum; the object's CRC64NVME in Ferry's completion answer (or, when that answer was lost, in the
        /// `x-amz-checksum-crc64nvme` of the upload's `HEAD`) is compared with the file's, and a difference is a
        /// `checksumMismatch` error (the object is not what the file holds).
        case ietf
    }

    /// What the upload became.
    public struct Result: Sendable, Hashable {
        /// The upload's URL.
        public var uploadURL: URL
        /// Its size in bytes.
        public var size: Int64
        /// The object's ETag, when the server said it.
        public var etag: String?
    }

    /// The protocol spoken.
    public var wireProtocol: WireProtocol
    /// The transport.
    public var transport: any HTTPTransport
    /// Bytes per tus `PATCH` (the IETF append sends everything left in one request). A chunk cut short keeps nothing
    /// (its checksum cannot be checked), so after such a failure the uploader halves its chunks, down to 1 MiB.
    public var chunkSize: Int64
    /// How often a failed request is retried in a row, and how long between tries.
    public var retryPolicy: RetryPolicy
    /// The longest one request may take.
    public var requestTimeout: Duration = .seconds(3600)
    /// The least time between two progress reports while bytes are being sent (one always comes when the server
    /// confirms an offset, and when the last byte is sent); `.zero` reports every slice the transport sends.
    public var progressInterval: Duration = .milliseconds(100)
    /// Told about each retry before its wait: which retry in a row it is (from 1), the failure, and how long the
    /// uploader waits (the service's `Retry-After` when it asked for longer than the backoff, up to
    /// ``RetryPolicy/maxRetryAfter``), so that an app can say why nothing moves.
    public var onRetry: @Sendable (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void = { _, _, _ in }

    /// Creates an uploader.
    public init(
        protocol wireProtocol: WireProtocol, transport: (any HTTPTransport)? = nil, chunkSize: Int64 = 64 * 1024 * 1024,
        retryPolicy: RetryPolicy = RetryPolicy()
    ) {
        self.wireProtocol = wireProtocol
        self.transport = transport ?? platformDefaultTransport()
        self.chunkSize = max(1, chunkSize)
        self.retryPolicy = retryPolicy
    }

    /// Uploads `file`: creates the upload at `creationURL` (signing the creation with `signer` when given) or resumes
    /// the upload at `resuming`, then appends until the server has every byte.
    ///
    /// - Parameters:
    ///   - file: the file to send.
    ///   - creationURL: where a new upload is created (a tus or IETF creation endpoint).
    ///   - signer: signs the creation request (SigV4) when the endpoint asks for it; nil sends it unsigned.
    ///   - resuming: the URL of an upload created before (told to `onCreated`), to continue instead of creating one.
    ///   - onCreated: called with a new upload's URL, before its first byte is sent (keep it to resume later).
    ///   - progress: called with the bytes sent and the bytes the server has confirmed storing
    ///     (``UploadProgress/totalBytesStored``, the offset a resumed upload starts from).
    public func upload(
        file: URL, creationURL: URL, signer: SigV4Signer? = nil, resuming existing: URL? = nil,
        onCreated: @Sendable (URL) -> Void = { _ in }, progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) async throws(FerryError) -> Result {
        let size: Int64
        let modified: Double
        let initial: FileRanges.State
        do {
            (size, modified) = try FileRanges.attributes(of: file.path)
            initial = try FileRanges.state(of: file.path)
        } catch {
            throw FerryError(.fileNotFound, "\(file.path) cannot be read.")
        }
        let path = file.path
        let unchanged: @Sendable () -> Bool = { (try? FileRanges.state(of: path)) == initial }
        var uploadURL: URL
        var offset: Int64
        var resumable: (URL, Int64)?
        if let existing, let current = try await retrying({ () throws(FerryError) in try await self.offset(of: existing) }),
            current.offset <= size
        {
            if current.complete, current.offset == size {
                // Completed by the run before, whose last answer was lost: nothing is left to send when the object's
                // checksum shows it is the file. A server that shows none (the object was replaced or deleted since,
                // or it reports no checksum) cannot tell: the file is sent afresh.
                if let stored = current.crc64nvme {
                    try await Self.compare(stored, with: file, size: size)
                    ProgressMeter(alreadySent: size, expected: size, report: progress).stored(upTo: size)
                    return Result(uploadURL: existing, size: size, etag: current.etag)
                }
            } else if try await Self.holdsFile(current.received, file: file, length: current.offset) {
                resumable = (existing, current.offset)
            } else {
                // What the upload holds is no longer the file's start (it changed with its size and time kept):
                // continuing would join old bytes to new. It is ended, and the file sent afresh.
                try? await terminate(existing)
            }
        }
        if let resumable {
            (uploadURL, offset) = resumable
        } else {
            uploadURL = try await retrying { () throws(FerryError) in
                try await self.create(at: creationURL, size: size, name: file.lastPathComponent, signer: signer)
            }
            onCreated(uploadURL)
            offset = 0
        }
        let meter = ProgressMeter(alreadySent: offset, expected: size, interval: progressInterval, report: progress)
        meter.stored(upTo: offset)
        var failures = 0
        // A tus chunk carries its checksum, so one cut short keeps nothing: after a failure that stored nothing the
        // chunk halves (down to 1 MiB), so that a link that drops now and then still gets chunks through.
        var chunk = chunkSize
        // Before an IETF completion: the CRC64NVME the server received, checked against the file (nil inside when the
        // server reports none); nil until checked.
        var completion: String??
        while true {
            try Task.checkCancellation(orThrow: FerryError(.cancelled, "The upload was cancelled."))
            // A file that changed (grew, shrank, was rewritten, its modification time put back or not: the inode's
            // change time still moves) is not sent on: the upload would complete as a mix of what it held before and
            // after, or as its start alone.
            guard unchanged(), initial.size == size else {
                throw FerryError(
                    .cannotResumeUpload, "The file \(file.path) changed while it was being uploaded; it was not completed.")
            }
            // Every byte sent in IETF: the server is seen to hold the file as it is now before the completing append
            // (once: an append refused for the request rate is sent again without asking again).
            if wireProtocol == .ietf, offset == size, completion == nil {
                guard
                    let current = try await retrying({ () throws(FerryError) in try await self.offset(of: uploadURL) })
                else {
                    // Not its URL: the URL is the upload's credential.
                    throw FerryError(.cannotResumeUpload, "The upload is gone from the server (expired or terminated).")
                }
                if current.complete, current.offset == size {
                    // A server that completes an upload once its offset reaches its length, as some do.
                    try await Self.compare(current.crc64nvme, with: file, size: size, modified: modified)
                    meter.stored(upTo: size)
                    return Result(uploadURL: uploadURL, size: size, etag: current.etag)
                }
                if current.offset == size {
                    completion = .some(
                        try await verifyBeforeCompleting(
                            current.received, file: file, size: size, unchanged: unchanged, at: uploadURL))
                }
            }
            do throws(FerryError) {
                meter.beginAppend(at: offset)
                let (next, etag, done) = try await append(
                    file: file, size: size, modified: modified, verified: completion ?? nil, to: uploadURL, at: offset,
                    chunk: chunk, meter: meter)
                if done {
                    meter.stored(upTo: size)
                    return Result(uploadURL: uploadURL, size: size, etag: etag)
                }
                // An accepted append that stored nothing counts as a failure: a service that never moves the offset
                // ends the upload after the retries instead of being sent the same bytes for ever.
                guard next > offset else {
                    throw FerryError(.server, "The service accepted an append at \(offset) but stored none of it.")
                }
                offset = next
                meter.stored(upTo: offset)
                failures = 0
            } catch {
                // 409: another request moved the offset; 460: the chunk arrived damaged and nothing of it was kept.
                guard error.code == .network || error.code == .timeout || error.code == .server || error.httpStatus == 409
                    || error.httpStatus == 460,
                    failures < retryPolicy.maxRetryCount
                else { throw error }
                failures += 1
                await wait(before: failures, after: error)
                // Refused before anything was stored (the service is busy, or the key past its request rate): the same
                // append again, without asking for the offset first, which would take the turn it waited for.
                if error.httpStatus == 503 || error.httpStatus == 429 { continue }
                guard let current = try await retrying({ () throws(FerryError) in try await self.offset(of: uploadURL) }) else {
                    // Not its URL: the URL is the upload's credential.
                    throw FerryError(.cannotResumeUpload, "The upload is gone from the server (expired or terminated).")
                }
                // An append cut short after bytes were stored (an IETF append keeps what arrived) made progress: a link
                // that drops now and then keeps going; only failures in a row that store nothing end the upload, and
                // those halve a tus chunk.
                guard current.offset <= size else { throw Self.impossibleOffset(current.offset) }
                if current.offset > offset {
                    failures = 0
                } else if error.code == .network || error.code == .timeout {
                    chunk = max(min(chunkSize, Self.smallestChunk), chunk / 2)
                }
                offset = current.offset
                meter.stored(upTo: offset)
                // The append completed the upload, and only its answer was lost.
                if current.complete, offset == size {
                    try await Self.compare(current.crc64nvme, with: file, size: size, modified: modified)
                    return Result(uploadURL: uploadURL, size: size, etag: current.etag)
                }
            }
        }
    }

    /// The upload at `url` when the server has completed it with `file`'s bytes (a run whose last answer was lost, or
    /// that was stopped before it heard): every byte is there, and the object's CRC64NVME, as the server reports it,
    /// is the file's. Nil when it is not complete, is gone, or holds other bytes (or its server reports no checksum
    /// to show they are the file's: another client may have completed it).
    ///
    /// - Throws: ``FerryError`` for the network's failures, and `fileNotFound` when the file cannot be read.
    public func completed(_ url: URL, file: URL) async throws(FerryError) -> Result? {
        guard let size = try? FileRanges.attributes(of: file.path).size else {
            throw FerryError(.fileNotFound, "\(file.path) cannot be read.")
        }
        guard let current = try await retrying({ () throws(FerryError) in try await self.offset(of: url) }),
            current.offset == size, current.complete, let stored = current.crc64nvme,
            try await Self.checksum(.crc64nvme, of: file, offset: 0, length: size) == stored
        else { return nil }
        return Result(uploadURL: url, size: size, etag: current.etag)
    }

    // MARK: Requests

    private var versionHeaders: [(name: String, value: String)] {
        switch wireProtocol {
        case .tus: [("Tus-Resumable", "1.0.0")]
        case .ietf: [("Upload-Draft-Interop-Version", "6")]
        }
    }

    /// Creates an empty upload; its URL.
    private func create(at creationURL: URL, size: Int64, name: String, signer: SigV4Signer?) async throws(FerryError) -> URL {
        var headers = versionHeaders
        switch wireProtocol {
        case .tus:
            headers.append(("Upload-Length", String(size)))
            headers.append(("Upload-Metadata", "filename " + Data(name.utf8).base64EncodedString()))
        case .ietf:
            headers.append(("Upload-Complete", "?0"))
            headers.append(("Upload-Length", String(size)))
        }
        headers.append(("Content-Length", "0"))
        if let signer {
            guard let host = HTTPTarget.authority(of: creationURL) else {
                throw FerryError(.invalidArgument, "The creation URL has no host.")
            }
            headers.append(("host", host))
            headers = signer.sign(
                method: "POST", path: creationURL.path(percentEncoded: true), query: [], headers: headers,
                payloadHash: SigV4.unsignedPayload, date: ServiceClock.now(for: host)
            ).headers
            headers.removeAll { $0.name == "host" }
        }
        let response = try await send(TransportRequest(method: "POST", url: creationURL.absoluteString, headers: headers, timeout: .seconds(60)))
        guard response.status == 201, let location = response.header("Location"),
            let url = URL(string: location, relativeTo: creationURL)?.absoluteURL
        else { throw Self.failure(response, "create the upload") }
        return url
    }

    /// The upload's offset, whether it is complete (the IETF draft's `Upload-Complete: ?1`; a tus upload completes
    /// with the append that reaches its `Upload-Length`), the ETag of its object and, for a complete upload, Ferry's
    /// CRC64NVME of that object while it is the object the upload made; nil when the upload is gone.
    private func offset(of url: URL) async throws(FerryError)
        -> (offset: Int64, complete: Bool, etag: String?, crc64nvme: String?, received: String?)?
    {
        let response = try await send(TransportRequest(method: "HEAD", url: url.absoluteString, headers: versionHeaders, timeout: .seconds(60)))
        if response.status == 404 || response.status == 410 { return nil }
        guard (200..<300).contains(response.status), let offset = response.header("Upload-Offset").flatMap(Int64.init) else {
            throw Self.failure(response, "read the upload's offset")
        }
        guard offset >= 0 else { throw Self.impossibleOffset(offset) }
        // A tus upload completes with the append that reaches its length.
        let complete = switch wireProtocol {
        case .ietf: response.header("Upload-Complete") == "?1"
        case .tus: response.header("Upload-Length").flatMap(Int64.init) == offset
        }
        return (
            offset, complete,
            response.header("ETag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
            response.header("x-amz-checksum-crc64nvme"), response.header("Ferry-Received-CRC64NVME")
        )
    }

    /// Whether the first `length` bytes of `file` are those an upload holds, by the CRC64NVME of them a Ferry server
    /// reports (`received`); true when the server reports none (another tus or IETF server), or holds nothing yet.
    private static func holdsFile(_ received: String?, file: URL, length: Int64) async throws(FerryError) -> Bool {
        guard let received, length > 0 else { return true }
        return try await checksum(.crc64nvme, of: file, offset: 0, length: length) == received
    }

    /// Before an IETF upload holding every byte of `file` is completed: the CRC64NVME of what the server received
    /// (`received`, as a Ferry server reports it) must be the file's as it is now. Returns it; nil when the server
    /// reports none. A file written to while it was sent (its size and times kept or not), or bytes damaged on their
    /// way, are a `checksumMismatch`, and the upload is ended uncompleted: the object at its key stays as it was.
    private func verifyBeforeCompleting(
        _ received: String?, file: URL, size: Int64, unchanged: @Sendable () -> Bool, at url: URL
    ) async throws(FerryError) -> String? {
        guard let received else { return nil }
        let local = try await Self.checksum(.crc64nvme, of: file, offset: 0, length: size)
        guard local == received else {
            try? await terminate(url)
            let reason =
                unchanged()
                ? "the bytes the service received (CRC64NVME \(received), the file's \(local)) were damaged on their "
                    + "way"
                : "\(file.lastPathComponent) changed while it was being uploaded"
            throw FerryError(
                .checksumMismatch,
                "\(reason): the upload was ended uncompleted, and the object at its key was left as it was.")
        }
        return received
    }

    /// Whether the upload at `url` is complete; nil when it is gone.
    package func isComplete(_ url: URL) async throws(FerryError) -> Bool? {
        try await retrying { () throws(FerryError) in try await self.offset(of: url) }?.complete
    }

    /// Ends the upload at `url` on the server (tus termination, the IETF draft's cancellation): what it received is
    /// removed. An upload that is gone already is not an error.
    public func terminate(_ url: URL) async throws(FerryError) {
        let response = try await retrying { () throws(FerryError) in
            try await self.send(
                TransportRequest(
                    method: "DELETE", url: url.absoluteString, headers: self.versionHeaders + [("Content-Length", "0")],
                    timeout: .seconds(60)))
        }
        guard (200..<300).contains(response.status) || response.status == 404 || response.status == 410 else {
            throw Self.failure(response, "end the upload")
        }
    }

    /// The least a tus chunk halves to after failures that stored nothing.
    static let smallestChunk: Int64 = 1024 * 1024

    /// One append from `offset` (of at most `chunk` bytes in tus); the new offset, the ETag of a completed upload, and
    /// whether it is complete.
    /// `verified`: the CRC64NVME the server was seen to have received, the file's, before an IETF completion.
    private func append(
        file: URL, size: Int64, modified: Double, verified: String?, to url: URL, at offset: Int64, chunk: Int64,
        meter: ProgressMeter
    ) async throws(FerryError) -> (Int64, String?, Bool) {
        var headers = versionHeaders + [("Upload-Offset", String(offset))]
        let length: Int64
        switch wireProtocol {
        case .tus:
            length = min(chunk, size - offset)
            headers.append(("Content-Type", "application/offset+octet-stream"))
            if length > 0 {
                headers.append(("Upload-Checksum", "sha1 " + (try await Self.checksum(.sha1, of: file, offset: offset, length: length))))
            }
        case .ietf:
            // The bytes go without completing the upload; it is completed by an empty append once the server is seen
            // to hold the file as it is now, so that a file written to while it was sent is never stored as a mix of
            // old and new bytes in place of the object at its key.
            length = size - offset
            headers += [("Content-Type", "application/partial-upload"), ("Upload-Complete", length > 0 ? "?0" : "?1")]
        }
        headers.append(("Content-Length", String(length)))
        let body = StreamedBody(length > 0 ? [.file(path: file.path, offset: offset, length: length)] : [])
        let response = try await send(
            TransportRequest(method: "PATCH", url: url.absoluteString, headers: headers, streamedBody: body, timeout: requestTimeout),
            bodyProgress: { meter.appended($0) })
        let etag = response.header("ETag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        switch (wireProtocol, response.status) {
        case (.tus, 204):
            guard let next = response.header("Upload-Offset").flatMap(Int64.init) else {
                throw Self.failure(response, "append")
            }
            guard (offset...offset + length).contains(next) else { throw Self.impossibleOffset(next) }
            if next == size {
                try await Self.compare(response.header("x-amz-checksum-crc64nvme"), with: file, size: size, modified: modified)
            }
            return (next, etag, next == size)
        case (.ietf, 204) where length > 0:
            guard let next = response.header("Upload-Offset").flatMap(Int64.init) else {
                throw Self.failure(response, "append")
            }
            guard (offset...offset + length).contains(next) else { throw Self.impossibleOffset(next) }
            // A server that completed the upload at its length on its own says so.
            if response.header("Upload-Complete") == "?1" {
                try await Self.compare(
                    response.header("x-amz-checksum-crc64nvme"), with: file, size: size, modified: modified)
                return (next, etag, true)
            }
            return (next, nil, false)
        case (.ietf, 200):
            let object = try? JSONDecoder().decode([String: String].self, from: Data(response.body))
            // A 2xx that does not say the upload is complete at its length (a middlebox's page) is not its completion.
            guard response.header("Upload-Complete") == "?1" || response.header("Upload-Offset") == String(size)
                || object?["Size"] == String(size)
            else { throw Self.failure(response, "append") }
            if let verified, let stored = object?["ChecksumCRC64NVME"], stored == verified { return (size, etag, true) }
            try await Self.compare(object?["ChecksumCRC64NVME"], with: file, size: size, modified: modified)
            return (size, etag, true)
        default:
            throw Self.failure(response, "append")
        }
    }

    /// Compares the CRC64NVME a service reports for a completed upload (nil: it reported none) with the file's; a
    /// difference is a `checksumMismatch` (the object is not what the file holds), said to be the file's change when
    /// its modification time is no longer `modified` (the one it had when the upload began, when known). A file whose
    /// size or time is no longer the upload's is a `checksumMismatch` too, whatever the checksums: it changed during
    /// the last append (grew, say), and the object holds it as it was.
    private static func compare(_ stored: String?, with file: URL, size: Int64, modified: Double? = nil)
        async throws(FerryError)
    {
        if let modified, (try? FileRanges.attributes(of: file.path)).map({ $0.size == size && $0.modified == modified }) != true {
            throw FerryError(
                .checksumMismatch,
                "The service stored \(file.lastPathComponent) as it was when its upload began: the file changed while it was being uploaded.")
        }
        guard let stored else { return }
        let local = try await checksum(.crc64nvme, of: file, offset: 0, length: size)
        guard local == stored else {
            let now = try? FileRanges.attributes(of: file.path).modified
            let reason = modified != nil && now != modified
                ? "the file changed while it was being uploaded"
                : "the file changed with its modification time kept, or they were damaged on their way"
            throw FerryError(
                .checksumMismatch,
                "The service stored bytes that differ from \(file.lastPathComponent) (CRC64NVME \(stored), the file's \(local)): \(reason).")
        }
    }

    /// The base64 checksum of `length` bytes of `file` from `offset`, read a piece at a time: a tus chunk's SHA-1, a
    /// whole file's CRC64NVME or MD5.
    static func checksum(_ algorithm: ChecksumAlgorithm, of file: URL, offset: Int64, length: Int64)
        async throws(FerryError) -> String
    {
        try await FerryError.catching(.fileNotFound, "Reading \(file.path)") {
            var checksummer = Checksummer(algorithm)
            for try await piece in StreamedBody([.file(path: file.path, offset: offset, length: length)]).chunks {
                piece.withUnsafeBytes { checksummer.update($0) }
            }
            guard checksummer.byteCount == UInt64(length) else {
                throw FerryError(.fileNotFound, "\(file.path) is shorter than when its upload began.")
            }
            return checksummer.finalizeBase64()
        }
    }

    private func send(_ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void = { _ in })
        async throws(FerryError) -> TransportResponse
    {
        do {
            let response = try await transport.send(request, bodyProgress: bodyProgress, responseSink: nil)
            if let host = URL(string: request.url).flatMap(HTTPTarget.authority(of:)) {
                ServiceClock.observe(
                    status: response.status, body: response.body, dateHeader: response.header("Date"), from: host)
            }
            return response
        } catch let error as TransportError {
            throw FerryError(error.isTimeout ? .timeout : .network, error.message)
        } catch is CancellationError {
            throw FerryError(.cancelled, "The upload was cancelled.")
        } catch {
            throw FerryError(.network, "The request failed: \(error)")
        }
    }

    /// Runs `body`, retrying network failures and 5xx answers as ``retryPolicy`` says.
    private func retrying<T: Sendable>(_ body: () async throws(FerryError) -> T) async throws(FerryError) -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch {
                guard error.code == .network || error.code == .timeout || error.code == .server,
                    attempt < retryPolicy.maxRetryCount
                else { throw error }
                attempt += 1
                await wait(before: attempt, after: error)
            }
        }
    }

    /// Tells ``onRetry`` of retry number `attempt` after `error`, then waits as ``retryPolicy`` says (a cancellation
    /// ends the wait; the caller's next step sees it).
    private func wait(before attempt: Int, after error: FerryError) async {
        let delay = retryPolicy.wait(forAttempt: attempt, after: error)
        onRetry(attempt, error, delay)
        try? await Task.sleep(for: delay)
    }

    /// The error for an offset no upload of this file can have (negative, past the bytes sent, behind the offset the
    /// append was sent at): the service is not keeping the upload, and nothing is sent on the strength of it.
    private static func impossibleOffset(_ offset: Int64) -> FerryError {
        FerryError(.cannotResumeUpload, "The service answered an upload offset of \(offset), which this upload cannot have.")
    }

    /// The error for an answer the protocol does not expect: the server's reason (its plain-text body), the status.
    private static func failure(_ response: TransportResponse, _ step: String) -> FerryError {
        let reason = String(decoding: response.body.prefix(512), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // 460: tus's checksum mismatch, bytes damaged on their way (nothing of them was kept): the link's fault. A 2xx
        // without what the protocol answers (a middlebox's page) is the service's, as a 5xx: retried, resumable.
        let code: FerryError.Code =
            response.status == 460 ? .network
            : response.status >= 500 || response.status == 429 || (200..<300).contains(response.status) ? .server
            : .invalidArgument
        var error = FerryError(
            code,
            "Could not \(step): HTTP \(response.status)\(reason.isEmpty ? "" : ", " + reason)", httpStatus: response.status)
        error.retryAfter = RetryPolicy.retryAfter(of: response)
        return error
    }
}

extension Task where Success == Never, Failure == Never {
    /// Throws `error` when the current task is cancelled.
    static func checkCancellation(orThrow error: FerryError) throws(FerryError) {
        if Task.isCancelled { throw error }
    }
}
