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
}

/// The two JSON calls of the publish API: apply and commit. The signature is the authentication; no SigV4.
struct PublishServiceCall: Sendable {
    let endpoint: URL
    let configuration: ObjectStorageClient.Configuration

    /// The service's answer: status and JSON object, or a transport failure after retries.
    private func post(_ action: String, _ body: [String: Any]) async throws -> (status: Int, object: [String: Any]) {
        let data = [UInt8](try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]))
        var base = endpoint.absoluteString
        if base.hasSuffix("/") { base.removeLast() }
        let request = TransportRequest(
            method: "POST", url: base + "/_ferry/ugc/" + action, headers: [("content-type", "application/json")],
            body: data, timeout: configuration.timeoutIntervalForRequest)
        var attempt = 0
        while true {
            do {
                let response = try await configuration.transport.send(
                    request, bodyProgress: { _ in }, responseSink: nil)
                let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
                if response.status >= 500, attempt < configuration.retryPolicy.maxRetryCount {
                    attempt += 1
                    try await Task.sleep(for: configuration.retryPolicy.delay(forAttempt: attempt))
                    continue
                }
                if let object { return (response.status, object) }
                // A refusal without a JSON body (a proxy's error page) is still a refusal; only a success that cannot
                // be read is an unreadable answer.
                guard (200..<300).contains(response.status) else { return (response.status, [:]) }
                throw PublishServiceAnswerError(status: response.status)
            } catch let error as TransportError {
                guard attempt < configuration.retryPolicy.maxRetryCount, !Task.isCancelled else { throw error }
                attempt += 1
                try await Task.sleep(for: configuration.retryPolicy.delay(forAttempt: attempt))
            }
        }
    }

    /// The error a refusal of the service maps to: an expired signature is 1020, anything else `code`.
    private static func refusal(_ object: [String: Any], status: Int, code: PublishError.Code) -> PublishError {
        let serverCode = object["code"] as? String
        let message = (object["message"] as? String) ?? "The service answered HTTP \(status)."
        return PublishError(
            serverCode == "SignatureExpired" ? .signatureExpired : code, message, serverCode: serverCode,
            httpStatus: status, requestId: object["requestId"] as? String)
    }

    private static func failure(_ error: any Error, code: PublishError.Code, parse: PublishError.Code) -> PublishError {
        if error is CancellationError { return PublishError(.userCancelled, "The publish was cancelled.") }
        if let answer = error as? PublishServiceAnswerError {
            return PublishError(
                parse, "The service's answer (HTTP \(answer.status)) is not JSON.", httpStatus: answer.status)
        }
        return PublishError(code, "The service could not be reached: \(error)")
    }

    /// ApplyUploadUGC: a new video, or (with `vodSessionKey`) the same one with a fresh credential.
    func apply(_ parameters: PublishParameters, job: PublishJob, vodSessionKey: String?) async throws(PublishError)
        -> PublishTicket
    {
        let videoFile = job.videoURL.lastPathComponent
        var body: [String: Any] = [
            "signature": parameters.signature, "videoName": parameters.videoName ?? videoFile,
            "videoType": job.videoURL.pathExtension, "videoSize": job.videoSize,
        ]
        if let cover = job.coverURL { body["coverType"] = cover.pathExtension }
        if let vodSessionKey { body["vodSessionKey"] = vodSessionKey }
        let answer: (status: Int, object: [String: Any])
        do {
            answer = try await post("ApplyUploadUGC", body)
        } catch {
            throw Self.failure(error, code: .requestFailed, parse: .parseFailed)
        }
        let object = answer.object
        guard (200..<300).contains(answer.status) else {
            throw Self.refusal(object, status: answer.status, code: .requestFailed)
        }
        guard let key = object["VodSessionKey"] as? String, let videoId = object["VideoId"] as? String,
            let endpointText = object["StorageEndpoint"] as? String, let endpoint = URL(string: endpointText),
            let bucket = object["StorageBucket"] as? String, let videoKey = object["VideoKey"] as? String,
            let authText = object["UploadAuth"] as? String, let auth = UploadAuth(encoded: authText)
        else { throw PublishError(.parseFailed, "The service's answer to the application lacks the upload details.") }
        return PublishTicket(
            vodSessionKey: key, videoId: videoId, endpoint: endpoint, bucket: bucket, videoKey: videoKey,
            coverKey: object["CoverKey"] as? String, auth: auth)
    }

    /// CommitUploadUGC: the service checks the files are stored and answers the video id and URLs.
    func commit(_ parameters: PublishParameters, vodSessionKey: String) async throws(PublishError) -> PublishResult {
        let answer: (status: Int, object: [String: Any])
        do {
            answer = try await post(
                "CommitUploadUGC", ["signature": parameters.signature, "vodSessionKey": vodSessionKey])
        } catch {
            throw Self.failure(error, code: .finishRequestFailed, parse: .finishResponseFailed)
        }
        let object = answer.object
        guard (200..<300).contains(answer.status) else {
            throw Self.refusal(object, status: answer.status, code: .finishRequestFailed)
        }
        guard let videoId = object["FileId"] as? String, let videoURL = object["MediaUrl"] as? String else {
            throw PublishError(.finishResponseFailed, "The service's answer to the commit lacks the video id or URL.")
        }
        return PublishResult(
            retCode: PublishError.Code.ok.rawValue, descMsg: "OK", videoId: videoId, videoURL: videoURL,
            coverURL: object["CoverUrl"] as? String)
    }
}

/// The service answered with something that is not a JSON object.
struct PublishServiceAnswerError: Error {
    var status: Int
}
