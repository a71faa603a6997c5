import FerryCore
import HTTPTypes

/// The header names the object API reads and writes, defined once.
extension HTTPField.Name {
    static let amzRequestId = Self("x-amz-request-id")!
    static let amzId2 = Self("x-amz-id-2")!
    static let amzExpectedBucketOwner = Self("x-amz-expected-bucket-owner")!
    static let amzSourceExpectedBucketOwner = Self("x-amz-source-expected-bucket-owner")!
    static let amzDecodedContentLength = Self("x-amz-decoded-content-length")!
    static let amzContentSHA256 = Self("x-amz-content-sha256")!
    static let amzTrailer = Self("x-amz-trailer")!
    static let amzChecksumMode = Self("x-amz-checksum-mode")!
    static let amzChecksumAlgorithm = Self("x-amz-checksum-algorithm")!
    static let amzSDKChecksumAlgorithm = Self("x-amz-sdk-checksum-algorithm")!
    static let amzChecksumType = Self("x-amz-checksum-type")!
    static let amzMpObjectSize = Self("x-amz-mp-object-size")!
    static let amzMPPartsCount = Self("x-amz-mp-parts-count")!
    static let amzBucketRegion = Self("x-amz-bucket-region")!
    static let contentMD5 = Self("Content-MD5")!
    static let amzCopySource = Self("x-amz-copy-source")!
    static let amzCopySourceRange = Self("x-amz-copy-source-range")!
    static let amzCopySourceIfMatch = Self("x-amz-copy-source-if-match")!
    static let amzCopySourceIfNoneMatch = Self("x-amz-copy-source-if-none-match")!
    static let amzCopySourceIfModifiedSince = Self("x-amz-copy-source-if-modified-since")!
    static let amzCopySourceIfUnmodifiedSince = Self("x-amz-copy-source-if-unmodified-since")!
    static let amzCopySourceVersionId = Self("x-amz-copy-source-version-id")!
    static let amzMetadataDirective = Self("x-amz-metadata-directive")!
    static let amzTaggingDirective = Self("x-amz-tagging-directive")!
    static let amzTagging = Self("x-amz-tagging")!
    static let amzTaggingCount = Self("x-amz-tagging-count")!
    static let amzExpiration = Self("x-amz-expiration")!
    static let amzACL = Self("x-amz-acl")!
    static let amzObjectOwnership = Self("x-amz-object-ownership")!
    static let amzStorageClass = Self("x-amz-storage-class")!
    static let amzIfMatchLastModifiedTime = Self("x-amz-if-match-last-modified-time")!
    static let amzIfMatchSize = Self("x-amz-if-match-size")!
    static let amzObjectAttributes = Self("x-amz-object-attributes")!
    static let amzMaxParts = Self("x-amz-max-parts")!
    static let amzPartNumberMarker = Self("x-amz-part-number-marker")!
}

extension ChecksumAlgorithm {
    /// The `x-amz-checksum-…` header of this algorithm.
    var headerField: HTTPField.Name? { HTTPField.Name(headerName) }
}

extension HTTPField.Name {
    /// The console's CSRF token header.
    static let ferryCSRF = Self("X-Ferry-CSRF")!
}
