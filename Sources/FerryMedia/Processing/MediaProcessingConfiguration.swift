import Foundation

/// How the server processes uploaded videos with ffmpeg and ffprobe.
public struct MediaProcessingConfiguration: Sendable {
    /// Directory holding `ffmpeg` and `ffprobe`; nil looks for them on `PATH`. Without them the server runs and
    /// videos wait at `UploadSucc` (GetVideoInfo says why).
    public var toolsDirectory: String?
    /// Jobs run at once; 0 turns processing off (videos wait at `UploadSucc`). One more worker, the quick lane, runs
    /// every job but transcodes, so that a probe, a cover or a removal never waits for a long transcode. Default: a
    /// quarter of the cores, at least 1.
    public var workers: Int = max(1, ProcessInfo.processInfo.activeProcessorCount / 4)
    /// The transcoding template groups. Default: the built-in `default` group (LD, SD, HD, FHD; SQ for audio).
    public var templates: TranscodeTemplates = .builtIn
    /// Longest run of one ffmpeg or ffprobe process; one that runs longer is killed and its video fails. Default 2 h.
    public var jobTimeLimit: Duration = .seconds(7200)
    /// Longest source a template group transcodes; a longer one ends in `TranscodeFail` (`MediaTooLong`) once probed,
    /// its source kept (NoTranscode still publishes it as it is). A source whose header understates its length, or
    /// gives none, is read only to just past the limit and refused for what it held. A few megabytes of still picture
    /// stamped to last a day would otherwise hold a worker for its time limit and fill gigabytes of segments, one key
    /// frame every two seconds per definition. Nil: no limit. Default 12 h.
    public var maxTranscodeDuration: Duration? = .seconds(43_200)
    /// How long a worker's claim on a job lasts unless renewed (every third of it); the job of a worker that died is
    /// taken over once it runs out. Default 30 s.
    public var lease: Duration = .seconds(30)
    /// Attempts per job before it fails for good (a failure that is not the file's fault, a worker that died).
    /// Default 3.
    public var maxAttempts: Int = 3
    /// Wait before the second attempt; doubles per attempt. Default 5 s.
    public var retryDelay: Duration = .seconds(5)
    /// How much lower the tools' CPU priority is than the server's (nice, 0–19). Default 10.
    public var niceness: Int32 = 10
    /// Whether the tools run only on CPU time requests do not want (Linux's SCHED_IDLE scheduling policy): uploads and
    /// downloads keep their speed while a transcode runs, which then takes what is left. Default true.
    public var idleScheduling = true
    /// The least CPU an idle-scheduled tool is let fall to, as a share of one core measured over
    /// ``cpuFloorWindow``: below it, the tool moves to normal scheduling at ``niceness`` for the rest of its run, so
    /// that a job on a machine that stays busy is slowed, never stopped (docs/operations.md). 0 turns the floor off.
    /// Default 0.1.
    public var cpuFloorShare: Double = 0.1
    /// How long the CPU floor's share is measured over. Default 10 s.
    public var cpuFloorWindow: Duration = .seconds(10)
    /// How long a first stream's files (`start/` under the video's prefix) stay once the ladder's master playlist has
    /// replaced theirs, so that a player that started on them plays to the end; then a job removes them. Default 24 h.
    public var firstStreamRetention: Duration = .seconds(86_400)
    /// Longest ffmpeg run for one picture made on request (`thumbnail.*`, `animated.*`); past it the run is killed and
    /// the request answered 503 `SlowDown` with `Retry-After`. Default 60 s.
    public var previewTimeLimit: Duration = .seconds(60)
    /// Pictures made on request kept in the store per video (beside its renditions, under their normalised
    /// parameters); storing one more deletes the video's oldest, except those stored in the last
    /// ``previewCacheGrace``. At least 1. Default 64.
    public var previewCacheLimit: Int = 64
    /// How long a stored picture stays whatever ``previewCacheLimit``: the request that made it is answered from the
    /// store after storing it. Default 60 s.
    package var previewCacheGrace: Duration = .seconds(60)
    /// Bytes ffmpeg and ffprobe leave free on the disk of their work directory: a run is not started, or is stopped,
    /// when less is free, and its job waits for space without counting an attempt (the server's `--min-free-bytes`).
    /// 0: no check. Default 0.
    package var minFreeBytes: Int64 = 0
    /// Whether the quick lane runs beside ``workers`` (tests turn it off to have exactly ``workers`` claim jobs).
    /// Default true.
    package var quickLane = true
    /// How often an idle worker looks for jobs. Default 500 ms.
    public var pollInterval: Duration = .milliseconds(500)

    /// Creates the defaults.
    public init() {}
}
