/// A backup or a restore of a data directory that did not happen (``DataDirectoryBackup``). Its message says why and
/// what to do, and never carries a secret; a restore that throws this has left the target directory as it found it.
package struct DataDirectoryBackupError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. A stable name (``description``).
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The directory to back up holds no catalog.
        package static let notADataDirectory = Code("notADataDirectory")
        /// The catalog references blobs that are not files in the data directory (they are in an S3-compatible
        /// store): the backup covers the embedded default only.
        package static let blobsNotInDataDirectory = Code("blobsNotInDataDirectory")
        /// Something exists already where the backup was to be written.
        package static let outputExists = Code("outputExists")
        /// The backup was to be written inside the data directory it backs up.
        package static let outputInsideDataDirectory = Code("outputInsideDataDirectory")
        /// Blobs the catalog snapshot referenced were deleted before they could be copied, at every attempt.
        package static let dataDirectoryChanging = Code("dataDirectoryChanging")
        /// The backup lacks its manifest or a file its manifest lists (it did not finish, or was cut).
        package static let incomplete = Code("incomplete")
        /// The backup's format is not one this version restores.
        package static let unsupportedFormat = Code("unsupportedFormat")
        /// A file of the backup does not have the size or SHA-256 its manifest lists.
        package static let checksumMismatch = Code("checksumMismatch")
        /// The backup's catalog does not check out (SQLite's integrity check, a blob it references that the backup
        /// lacks, counts that differ from the manifest's).
        package static let inconsistent = Code("inconsistent")
        /// The directory to restore into holds something already.
        package static let targetNotEmpty = Code("targetNotEmpty")
        /// The data directory holds what a killed restore left and no catalog: it is the restore's to complete.
        package static let unfinishedRestore = Code("unfinishedRestore")

        /// The code's name, e.g. `checksumMismatch`.
        package var description: String { name }
    }

    /// What went wrong.
    package var code: Code
    /// What happened and what to do, for people.
    package var message: String

    /// Creates an error.
    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    package var description: String { message }
}
