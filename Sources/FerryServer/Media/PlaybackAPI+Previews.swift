import FerryCore
import Foundation
import Hummingbird
import NIOCore

extension PlaybackAPI {
    /// The stored key of the picture a preview file name asks for (`thumbnail.{jpg,png,webp}`,
    /// `animated.{gif,webp}`), made now when it is not stored yet; nil when `file` names no preview.
    ///
    /// Called once the playback URL's authorization accepted the request and the video is resolved. Parameters out of
    /// bounds are refused with 400 `InvalidArgument` and a reason; a server without ffmpeg answers 501. The wait for
    /// the picture ends when the client hangs up from `connection`: a picture no one else waits for is then not made
    /// (its ffmpeg is killed, or never started).
    func previewKey(file: String, request: Request, video: VideoRecord, connection: (any Channel)?)
        async throws -> String?
    {
        guard PreviewRequest.isPreviewFile(file) else { return nil }
        guard let previews else {
            throw FerryDomainError(.notImplemented, "Pictures of videos need ffmpeg on the server.")
        }
        let query = try PreviewRequest.query(request.uri.queryParameters.map { (String($0.key), String($0.value)) })
        guard let presence = await connection?.clientPresence() else {
            return try await previews.picture(file: file, query: query, of: video)
        }
        return try await presence.cancellingWhenGone { [query] in
            try await previews.picture(file: file, query: query, of: video)
        }
    }
}
