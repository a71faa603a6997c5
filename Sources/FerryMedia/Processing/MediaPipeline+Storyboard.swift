import FerryStorage
import Foundation

extension MediaPipeline {
    /// Makes the video's storyboard (``StoryboardPlan``) from the source into `directory`, beside the renditions it is
    /// published with: `storyboard.jpg` and `storyboard.vtt`. A video without a picture or a duration has none; a
    /// storyboard ffmpeg cannot make is left out (logged), never failing the transcode.
    func makeStoryboard(
        source: String, info: MezzanineInfo, into directory: String, work: String, videoId: String
    ) async throws {
        guard info.hasVideo, let plan = StoryboardPlan(duration: info.playingDuration) else { return }
        let image = directory + "/" + StoryboardPlan.imageFileName
        let errors = work + "/storyboard.err"
        let outcome = try await run(\.ffmpeg, plan.arguments(input: source, output: image), errors: errors)
        let sprite = outcome.succeeded && WorkFiles.size(of: image) > 0 ? try await measure(image, directory: work) : nil
        guard let height = sprite?.height, height >= plan.rows, plan.rows > 0 else {
            try? FileManager.default.removeItem(atPath: image)
            // ffmpeg may succeed with fewer frames than the plan's tiles (a clip of one frame): the sprite says so.
            let reason =
                outcome.succeeded
                ? "the sprite has \(sprite?.height ?? 0) pixel rows for \(plan.rows) rows of tiles"
                : Self.hidingPaths(ChildProcess.tail(of: errors), work)
            logger.warning(
                "storyboard not made",
                metadata: [
                    "ferry.video-id": .string(videoId), "ferry.exit-code": "\(outcome.exitCode ?? -1)",
                    "error": .string(reason),
                ])
            return
        }
        let vtt = plan.vtt(tileHeight: height / plan.rows)
        try Data(vtt.utf8).write(to: URL(fileURLWithPath: directory + "/" + StoryboardPlan.vttFileName))
    }
}
