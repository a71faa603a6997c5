import FerryCore
import Foundation

extension MediaAPI {
    /// The playback URL of the video's storyboard (`storyboard.vtt` beside its renditions, with `token` for a signed
    /// video, which reads the sprite too), when the transcode that published them made one.
    func storyboardURL(of video: VideoRecord, _ call: Call, token: String?) async throws -> String? {
        guard let prefix = video.outputPrefix else { return nil }
        guard try await store.storedObject(bucket: video.bucket, key: prefix + "/" + StoryboardPlan.vttFileName) != nil
        else { return nil }
        return PlaybackToken.url(
            base: publicBase(call).base, videoId: video.videoId, file: StoryboardPlan.vttFileName, token: token)
    }
}
