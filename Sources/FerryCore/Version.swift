/// The version of the Ferry libraries.
public enum FerryCoreVersion {
    /// Semantic version string.
    public static let string = "0.1.0"
}
