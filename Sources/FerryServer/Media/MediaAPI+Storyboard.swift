import FerryCore
import Foundation

extension MediaAPI {
    /// The URL of the video's storyboard (`storyboard.vtt` beside its renditions, under the playback URL `playBase`),
    /// when the transcode that published them made one.
    func storyboardURL(of video: VideoRecord, playBase: String) async throws -> String? {
        guard let prefix = video.outputPrefix else { return nil }
        do {
            _ = try await store.object(bucket: video.bucket, key: prefix + "/" + StoryboardPlan.vttFileName)
            return playBase + StoryboardPlan.vttFileName
        } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
            return nil
        }
    }
}
