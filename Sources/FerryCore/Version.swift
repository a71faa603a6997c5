public enum FerryCoreVersion { public static let string = "0.1.0" }
