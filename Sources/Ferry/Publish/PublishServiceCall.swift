import FerryCore
import Foundation

/// Where and with what to upload, as the service's apply answered.
struct PublishTicket: Sendable {
    var vodSessionKey: String
    var videoId: String
    var endpoint: URL
    var bucket: String
    var videoKey: String
    var coverKey: String?
    var auth: UploadAuth
    /// The service has the video already (a resumed publish that stopped at the cover or the commit).
    var videoStored = false
}

/// The two JSON calls of the publish API: apply and commit. The signature is the authentication; no SigV4.
struct PublishServiceCall: Sendable {
    let endpoint: URL
    let configuration: ObjectStorageClient.Configuration

    /// The service's answer: status and JSON object, or a transport failure after retries.
    func post(_ action: String, _ body: [String: Any]) async throws -> (status: Int, object: [String: Any]) {
        let data = [UInt8](try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))
        var base = endpoint.absoluteString
        if base.hasSuffix("/") { base.removeLast() }
        // A 5xx answer is retried; when retries run out it is returned as the refusal it is.
        var lastRefusal: (status: Int, object: [String: Any])?
        do {
            let told = configuration.onRetry
            return try await configuration.retryPolicy.run(
                clock: configuration.clock, retrying: { attempt, error, delay in told?(attempt, error, delay) }
            ) { attempt in
                let request = TransportRequest(
                    method: "POST", url: base + "/_ferry/ugc/" + action,
                    headers: [("content-type", "application/json")] + attempt.headers, body: data,
                    timeout: configuration.timeoutIntervalForRequest)
                let response = try await MediaServiceClient.send(request, configuration: configuration)
                let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
                if response.status >= 500 {
                    lastRefusal = (response.status, object ?? [:])
                    var error = FerryError(.server, "The service answered HTTP \(response.status).", httpStatus: response.status)
                    error.retryAfter = RetryPolicy.retryAfter(of: response)
                    throw error
                }
                if let object { return (response.status, object) }
                // A refusal without a JSON body (a proxy's error page) is still a refusal; only a success that cannot
                // be read is an unreadable answer.
                guard (200..<300).contains(response.status) else { return (response.status, [:]) }
                throw PublishServiceAnswerError(status: response.status)
            }
        } catch let error as FerryError where error.code == .server {
            guard let lastRefusal else { throw error }
            return lastRefusal
        }
    }

    /// The error a refusal of the service maps to: an expired signature is `.credentialsExpired` with 1020, anything
    /// else `.server` with `step`.
    private static func refusal(_ object: [String: Any], status: Int, step: PublishCode) -> FerryError {
        let serverCode = object["code"] as? String
        let message = (object["message"] as? String) ?? "The service answered HTTP \(status)."
        let expired = serverCode == "SignatureExpired"
        return .publish(
            expired ? .credentialsExpired : .server, expired ? .signatureExpired : step, message, httpStatus: status,
            serverCode: serverCode, requestId: object["requestId"] as? String)
    }

    /// A call that got no usable answer: cancelled (1017), an answer that is not JSON (`parse`), or the service
    /// not reached after retries (`step`, the transport's kind and words kept).
    private static func failure(_ error: any Error, step: PublishCode, parse: PublishCode) -> FerryError {
        if let answer = error as? PublishServiceAnswerError {
            return .publish(
                .server, parse, "The service's answer (HTTP \(answer.status)) is not JSON.", httpStatus: answer.status)
        }
        return .publish(FerryError(error, fallback: .network, "The request to the service"), at: step)
    }

    /// ApplyUploadUGC: a new video, or (with `vodSessionKey`) the same one with a fresh credential.
    func apply(_ parameters: PublishParameters, job: PublishJob, vodSessionKey: String?) async throws(FerryError)
        -> PublishTicket
    {
        let request = PublishContract.ApplyRequest(
            signature: parameters.signature, videoName: parameters.videoName ?? job.videoURL.lastPathComponent,
            videoType: job.videoURL.pathExtension, videoSize: job.videoSize, coverType: job.coverURL?.pathExtension,
            vodSessionKey: vodSessionKey)
        let answer: (status: Int, object: [String: Any])
        do {
            answer = try await post("ApplyUploadUGC", try Self.object(request))
        } catch {
            throw Self.failure(error, step: .requestFailed, parse: .parseFailed)
        }
        guard (200..<300).contains(answer.status) else {
            throw Self.refusal(answer.object, status: answer.status, step: .requestFailed)
        }
        guard let applied = Self.decode(PublishContract.ApplyAnswer.self, answer.object),
            let endpoint = URL(string: applied.storageEndpoint), let auth = UploadAuth(encoded: applied.uploadAuth)
        else {
            throw .publish(.server, .parseFailed, "The service's answer to the application lacks the upload details.")
        }
        return PublishTicket(
            vodSessionKey: applied.vodSessionKey, videoId: applied.videoId, endpoint: endpoint, bucket: applied.storageBucket,
            videoKey: applied.videoKey, coverKey: applied.coverKey, auth: auth,
            videoStored: applied.videoStored == true)
    }

    /// A contract request as the JSON object `post` sends.
    private static func object<T: Encodable>(_ value: T) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: MediaContract.encode(value)) as? [String: Any] ?? [:]
    }

    /// A contract answer read from the JSON object `post` received; nil when it does not fit.
    private static func decode<T: Decodable>(_ type: T.Type, _ object: [String: Any]) -> T? {
        guard let data = try? JSONSerialization.data(withJSONObject: object) else { return nil }
        return try? MediaContract.decode(type, from: data)
    }

    /// CommitUploadUGC: the service checks the files are stored and answers the video id and URLs.
    func commit(_ parameters: PublishParameters, vodSessionKey: String) async throws(FerryError) -> PublishResult {
        let answer: (status: Int, object: [String: Any])
        do {
            answer = try await post(
                "CommitUploadUGC", try Self.object(PublishContract.CommitRequest(signature: parameters.signature, vodSessionKey: vodSessionKey)))
        } catch {
            throw Self.failure(error, step: .finishRequestFailed, parse: .finishResponseFailed)
        }
        guard (200..<300).contains(answer.status) else {
            throw Self.refusal(answer.object, status: answer.status, step: .finishRequestFailed)
        }
        guard let committed = Self.decode(PublishContract.CommitAnswer.self, answer.object) else {
            throw .publish(
                .server, .finishResponseFailed, "The service's answer to the commit lacks the video id or URL.")
        }
        return PublishResult(
            retCode: PublishCode.ok.rawValue, descMsg: "OK", videoId: committed.fileId, videoURL: committed.mediaURL,
            coverURL: committed.coverURL)
    }
}

/// The service answered with something that is not a JSON object.
struct PublishServiceAnswerError: Error {
    var status: Int
}
