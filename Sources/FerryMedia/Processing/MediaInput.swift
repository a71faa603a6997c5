import FerryStorage

/// What ffprobe and ffmpeg may open when they read a file a client uploaded: the demuxers of audio, video and picture
/// files, over local files only. Playlists and scripts (HLS, DASH, concat) name other files, which the tools would
/// open on the server's disk and publish as the uploader's video; a source that needs such a demuxer fails as not
/// media ("Format not on whitelist"), and a demuxer on the list cannot open one for it either.
enum MediaInput {
    /// The demuxers an uploaded file may be read with.
    static let demuxers = [
        "mov", "matroska", "avi", "flv", "mpegts", "mpeg", "asf", "mxf", "dv", "ogg", "ivf", "h264", "hevc", "m4v",
        "mpegvideo", "mjpeg", "gif", "image2", "jpeg_pipe", "png_pipe", "webp_pipe", "bmp_pipe", "wav", "w64", "aiff",
        "caf", "mp3", "aac", "ac3", "eac3", "flac", "amr",
    ]

    /// The options that go before an uploaded file's `-i` (or ffprobe's file name). `-max_pixels` keeps decoders from
    /// taking frames larger than ``MezzanineInfo/maxPixels``: a few kilobytes of PNG declaring 16000×16000 made the
    /// probe alone take gigabytes. ffprobe then reports such a picture's size as unknown (0×0), and fails on a video
    /// stream that large; neither is transcoded (NoTranscode still publishes it as it is).
    static let options = [
        "-format_whitelist", demuxers.joined(separator: ","), "-protocol_whitelist", "file",
        "-max_pixels", String(MezzanineInfo.maxPixels),
    ]

    /// The video filter that makes a picture's pixels square: one whose sample aspect ratio is not 1 (anamorphic DVD,
    /// HDV's 1440×1080, a phone's `setsar`) is scaled to the width it is displayed at (to an even number), so that
    /// what is sized after it (covers, thumbnails, storyboards) keeps the shape a player shows. The same rule as the
    /// width a probe reports (``ProbeReport/Stream/displayWidth``), which sizes the renditions.
    static let squarePixels =
        "scale='if(gt(abs(sar-1),0.001)*between(sar,\(minimumSampleAspect),\(maximumSampleAspect)),"
        + "max(2,trunc(iw*sar/2)*2),iw)':ih,setsar=1"

    /// Sample aspect ratios taken as they are: one outside (a file that lies about itself, asking for frames a
    /// hundred times wider) is taken as square.
    static let minimumSampleAspect = 0.25
    static let maximumSampleAspect = 4.0

    /// Whether pixels of sample aspect `ratio` are displayed wider or narrower than they are stored (not square,
    /// within the ratios taken).
    static func isNonSquare(_ ratio: Double) -> Bool {
        abs(ratio - 1) > 0.001 && (minimumSampleAspect...maximumSampleAspect).contains(ratio)
    }
}
