import Crypto
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The publish (UGC) API: a device holding a publish signature from its app server applies for an upload, uploads the
/// video (and a cover) straight to the object API, and commits.
///
/// `POST /_ferry/ugc/ApplyUploadUGC` and `POST /_ferry/ugc/CommitUploadUGC` take JSON bodies whose `signature` field
/// is the authentication: a ``PublishSignature`` signed with an active access key (the root key or a stored key whose
/// policy allows `media:ApplyUploadUGC` / `media:CommitUploadUGC`). There is no SigV4 on these routes. Once the
/// signature verifies, the call takes a turn of its key's `RequestsPerSecond` (``RequestRateMiddleware``; past it,
/// 503 `Throttling` with `Retry-After`).
///
/// Apply creates a video in the catalog (status `Uploading`) and returns a `VodSessionKey`: a self-contained token,
/// HMAC'd with a key derived from the server's token key, naming the video, its object key and its cover key. Applying
/// again with that key returns the same video and keys with a fresh credential, which is how a device resumes.
/// Commit checks with the object store that the files are there and returns the video id and URLs.
public struct PublishAPI: Sendable {
    /// Path prefix of the publish API.
    public static let pathPrefix = "/_ferry/ugc/"
    /// How long the URLs commit returns are valid: 7 days, the longest a presigned URL may live.
    static let urlLifetime = 604_800

    let media: MediaAPI

    /// Answers `POST /_ferry/ugc/<action>` for the caller whose publish signature ``PublishSignatureMiddleware``
    /// verified.
    func respond(action: String, request: Request, context: FerryRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let principal = try caller.requirePrincipal()
        guard let signature = caller.publishSignature else { throw MediaError.missing("signature") }
        // One signature serves the whole publish: a key that could apply but not commit would leave a video uploaded
        // that it cannot finish.
        guard Self.operations.allSatisfy({ principal.allows(action: "media:" + $0) }) else {
            throw MediaError(
                "Forbidden", "The signing key must allow media:ApplyUploadUGC and media:CommitUploadUGC.", status: 403)
        }
        var request = request
        let data = Data(buffer: try await request.collectSmallBody())
        context.logger.debug("publish request", metadata: ["ferry.action": .string(action)])
        let call = MediaAPI.Call(principal: principal, endpoint: try context.endpoint())
        let answer: any Encodable & Sendable
        switch action {
        case Self.operations[0]: answer = try await apply(JSONBody.decode(PublishContract.ApplyRequest.self, from: data), signature, call)
        case Self.operations[1]:
            answer = try await commit(JSONBody.decode(PublishContract.CommitRequest.self, from: data), signature, call)
        default: throw Self.invalidAction(action)
        }
        return try JSONAnswer.response(WithRequestId(answer: answer, requestId: context.requestId), requestId: context.requestId)
    }

    /// The publish API's operations (`POST /_ferry/ugc/<name>`; a policy allows one as `media:<name>`).
    static let operations = ["ApplyUploadUGC", "CommitUploadUGC"]

    /// The refusal of an action the publish API does not have.
    static func invalidAction(_ action: some StringProtocol) -> MediaError {
        MediaError("InvalidAction", "\(action.prefix(64)) is not a publish API operation.", status: 404)
    }

    // MARK: Session key

    /// What a `VodSessionKey` names.
    struct Session: Codable {
        /// Video id.
        var v: String
        /// Object key of the video.
        var k: String
        /// Object key of the cover, when one was declared.
        var c: String?
        /// The access key the video belongs to.
        var o: String
    }

    static let sessionPurpose = "vod-session-key"

    func sessionKey(_ session: Session) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Four strings always encode; an empty body would only make a key no session matches.
        let body = SessionTokenCodec.base64url((try? encoder.encode(session)) ?? Data())
        let mac = media.credentials.tokens.authenticationCode(
            for: Data(("FV1." + body).utf8), purpose: Self.sessionPurpose)
        return "FV1.\(body).\(SessionTokenCodec.base64url(mac))"
    }

    /// The session a key names, when its MAC verifies and it belongs to `owner`.
    func session(_ key: String, owner: String) throws -> Session {
        let invalid = MediaError(
            "InvalidVodSessionKey", "The VodSessionKey is not one this service issued to this key.")
        let pieces = key.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 3, pieces[0] == "FV1", let mac = SessionTokenCodec.unbase64url(String(pieces[2])),
            let body = SessionTokenCodec.unbase64url(String(pieces[1]))
        else { throw invalid }
        let expected = media.credentials.tokens.authenticationCode(
            for: Data("FV1.\(pieces[1])".utf8), purpose: Self.sessionPurpose)
        // Constant-time comparison of the MACs.
        guard mac.count == expected.count, zip(mac, expected).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0,
            let session = try? BoundedJSON.decode(Session.self, from: body), session.o == owner
        else { throw invalid }
        return session
    }

    // MARK: Operations

    /// The client token of the video a signature valid once (`oneTimeValid=1`) makes, or nil for one that publishes
    /// until it expires: its digest (longer than any ClientToken CreateUploadVideo takes).
    static func onceToken(_ signature: PublishSignature) -> String? {
        signature.oneTimeValid == 1 ? "once:" + Hex.encode(SHA256.hash(data: Data(signature.original.utf8))) : nil
    }

    /// Refuses a signature valid once for any video but the one it made.
    static func checkOnce(_ signature: PublishSignature, video: VideoRecord) throws {
        guard let token = onceToken(signature), video.clientToken != token else { return }
        throw MediaError(
            "Forbidden", "A signature valid once (oneTimeValid) resumes and commits only the video it applied for.",
            status: 403)
    }

    static let coverTypes: Set<String> = ["png", "jpg", "jpeg", "gif", "webp", "heic"]

    func apply(_ input: PublishContract.ApplyRequest, _ signature: PublishSignature, _ call: MediaAPI.Call) async throws
        -> PublishContract.ApplyAnswer
    {
        let owner = call.principal.parentAccessKeyId
        if let key = input.vodSessionKey, !key.isEmpty {
            let session = try self.session(key, owner: owner)
            guard let video = try await media.catalog.video(session.v), video.status != VideoStatus.deleted,
                video.key == session.k
            else { throw MediaError.notFound("Video", session.v) }
            try Self.checkOnce(signature, video: video)
            // A stored video takes no more uploads of its file (new write credentials would let its bytes be
            // replaced): resuming then gives a credential for the cover alone, which a publish may still have to send
            // (without a cover, for nothing: the commit is what is left), and says the video is stored.
            if video.status == VideoStatus.uploading { return applyAnswer(session, key: key, call) }
            guard video.status != VideoStatus.uploadFailed else {
                throw MediaError.closedToUploads("Video", status: video.status)
            }
            return applyAnswer(session, key: key, call, writesVideo: false)
        }

        let videoType = (input.videoType ?? (input.videoName.map { ($0 as NSString).pathExtension } ?? "")).lowercased()
        guard !videoType.isEmpty else { throw MediaError.missing("videoType") }
        guard MediaAPI.isFileExtension(videoType) else {
            throw MediaError.invalid("videoType", "must be a file extension such as mp4.")
        }
        var coverType: String?
        if let type = input.coverType?.lowercased(), !type.isEmpty {
            guard Self.coverTypes.contains(type) else {
                throw MediaError.invalid("coverType", "must be one of png, jpg, jpeg, gif, webp, heic.")
            }
            coverType = type
        }
        let title = input.videoName.flatMap { $0.isEmpty ? nil : $0 } ?? "video"
        try MediaAPI.checkText(title, "videoName", max: 128)
        // The signature's sourceContext becomes the video's UserData, held to CreateUploadVideo's rules.
        try MediaAPI.checkText(signature.sourceContext, "sourceContext", max: 1024)
        if let size = input.videoSize, size < 0 || size > CatalogObjectStore.Limits.maxObjectSize {
            throw MediaError.invalid("videoSize", "must be between 0 and 5 TiB.")
        }
        let group = try media.templateGroup(signature.procedure)
        try await media.checkStorageQuota(forVideoOf: input.videoSize, call.principal)
        try await media.library.ensureBucket()
        let id = Hex.randomId()
        let session = Session(
            v: id, k: "video/\(id)/source.\(videoType)", c: coverType.map { "video/\(id)/cover.\($0)" }, o: owner)
        let now = Date()
        let fileName = (title as NSString).pathExtension.isEmpty ? title + "." + videoType : title
        // A signature valid once makes one video, ever: its digest is the video's client token, which the catalog
        // looks up whatever the video's status.
        let onceToken = Self.onceToken(signature)
        // Counted against the key's Videos quota in the change that creates it, as CreateUploadVideo does.
        var record = VideoRecord(
            videoId: id, title: title, fileName: fileName, description: nil, coverURL: nil,
            cateId: signature.classId, tags: nil, transcode: group, userData: signature.sourceContext,
            status: VideoStatus.uploading, size: nil, declaredSize: input.videoSize, bucket: media.bucket,
            key: session.k, owner: owner, createdAt: now, updatedAt: now, clientToken: onceToken)
        record.publishCoverKey = session.c ?? ""
        let created = try await media.catalog.createVideo(
            record, videoLimit: call.principal.quota.videos, tokenUsedOnce: onceToken != nil)
        guard created.videoId == id else {
            // Its video while it uploads (a device whose answer was lost gets it back); once stored, failed or
            // deleted, the signature has published what it may.
            guard created.status == VideoStatus.uploading else {
                throw MediaError(
                    "SignatureUsed",
                    "The signature is valid once (oneTimeValid) and has been used; ask the app server for a new one.",
                    status: 403)
            }
            // The session it was applied for, its cover too: one video has one cover, whatever this apply asks.
            let earlier = Session(
                v: created.videoId, k: created.key,
                // A video applied for before the key was kept has none: its cover is as this apply asks.
                c: created.publishCoverKey.map { $0.isEmpty ? nil : $0 }
                    ?? coverType.map { "video/\(created.videoId)/cover.\($0)" },
                o: owner)
            return applyAnswer(earlier, key: sessionKey(earlier), call)
        }
        return applyAnswer(session, key: sessionKey(session), call)
    }

    /// The answer for `session`: its keys, and a credential that writes its cover and, unless `writesVideo` is false
    /// (the video is stored), its video.
    func applyAnswer(_ session: Session, key: String, _ call: MediaAPI.Call, writesVideo: Bool = true)
        -> PublishContract.ApplyAnswer
    {
        PublishContract.ApplyAnswer(
            vodSessionKey: key, videoId: session.v, storageEndpoint: media.uploadBase(call).base,
            storageBucket: media.bucket, storageRegion: media.configuration.region, videoKey: session.k,
            coverKey: session.c,
            uploadAuth: media.uploadAuth(
                for: (writesVideo ? [session.k] : []) + (session.c.map { [$0] } ?? []), principal: call.principal
            ).encoded(),
            videoStored: writesVideo ? nil : true)
    }

    func commit(_ input: PublishContract.CommitRequest, _ signature: PublishSignature, _ call: MediaAPI.Call) async throws
        -> PublishContract.CommitAnswer
    {
        guard let key = input.vodSessionKey, !key.isEmpty else { throw MediaError.missing("vodSessionKey") }
        let session = try self.session(key, owner: call.principal.parentAccessKeyId)
        guard var video = try await media.catalog.video(session.v), video.status != VideoStatus.deleted,
            video.key == session.k
        else { throw MediaError.notFound("Video", session.v) }
        try Self.checkOnce(signature, video: video)
        // An expired upload's bytes were removed: the publish starts again (a new ApplyUploadUGC), not another upload.
        if video.status == VideoStatus.uploadFailed { throw MediaError.closedToUploads("Video", status: video.status) }
        // The object store, not the client, says whether the files are there.
        let stored: ObjectInfo
        do {
            stored = try await media.store.object(bucket: video.bucket, key: video.key)
        } catch let error as FerryDomainError where error.isNotFound {
            throw MediaError(
                "InvalidVideo.NotUploaded", "The video file has not been uploaded completely.", status: 409)
        }
        if let cover = session.c {
            do {
                _ = try await media.store.object(bucket: video.bucket, key: cover)
            } catch let error as FerryDomainError where error.isNotFound {
                throw MediaError("InvalidCover.NotUploaded", "The cover image has not been uploaded.", status: 409)
            }
        }
        // Normally the upload itself advanced the video; this covers a server stopped between the two.
        try await media.library.videoStored(video.videoId, object: stored)
        if let cover = session.c {
            // The catalog keeps the cover's key, as for a cover taken from the video: readers get a playback URL of
            // it built on their own request. A URL built here would name the Host of this request, which its
            // signature does not cover, for every later reader.
            video = try await media.catalog.updateVideo(video.videoId) { video in
                guard video.status != VideoStatus.deleted else { return .keep }
                video.snapshotKey = cover
                video.updatedAt = Date()
                return .save()
            } ?? video
        }
        var answer = PublishContract.CommitAnswer(
            fileId: video.videoId, mediaURL: try media.signedURL(key: video.key, call, expires: Self.urlLifetime),
            coverURL: nil)
        if let cover = session.c {
            answer.coverURL = try media.signedURL(key: cover, call, expires: Self.urlLifetime)
        } else if media.processingUnavailable == nil, await waitForSnapshot(video.videoId) {
            // No cover given: the one the server took from the video (it waits a few seconds for it; past that the
            // URL serves the cover once SnapshotComplete is sent).
            answer.coverURL = try await media.playURL(
                video, file: MediaAPI.coverFileName, audiences: [.cover], call,
                lifetime: TimeInterval(Self.urlLifetime))
        }
        return answer
    }
}

extension PublishAPI {
    /// Longest a commit waits for the cover taken from the video.
    static let snapshotWait: Duration = .seconds(10)

    /// Waits (at most ``snapshotWait``) until the video has a cover taken from it or cannot get one; true unless it
    /// cannot (no picture, processing failed, a source the probe could not read, no snapshot job).
    func waitForSnapshot(_ videoId: String) async -> Bool {
        let deadline = ContinuousClock.now + Self.snapshotWait
        while ContinuousClock.now < deadline {
            guard let video = try? await media.catalog.video(videoId) else { return false }
            if video.snapshotKey != nil { return true }
            if [VideoStatus.transcodeFail, VideoStatus.deleted].contains(video.status) { return false }
            // Past its probe without a description (GetMezzanineInfo's AnalysisFail; NoTranscode plays it as it is).
            if video.mezzanine == nil, ![VideoStatus.uploading, VideoStatus.uploadSucc].contains(video.status) {
                return false
            }
            if video.mezzanine.map({ !$0.hasVideo }) == true { return false }
            let jobs = (try? await media.catalog.jobs(videoId: videoId)) ?? []
            if video.mezzanine != nil, !jobs.contains(where: { $0.kind == .snapshot && !$0.state.isFinished }) {
                return false
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        return true
    }
}

