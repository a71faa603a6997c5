import HTTPTypes

/// The header names the object API reads and writes, defined once.
extension HTTPField.Name {
    static let amzRequestId = Self("x-amz-request-id")!
    static let amzId2 = Self("x-amz-id-2")!
    static let amzContentSHA256 = Self("x-amz-content-sha256")!
    static let amzDecodedContentLength = Self("x-amz-decoded-content-length")!
    static let amzTrailer = Self("x-amz-trailer")!
    static let amzChecksumMode = Self("x-amz-checksum-mode")!
    static let amzChecksumAlgorithm = Self("x-amz-checksum-algorithm")!
    static let amzSDKChecksumAlgorithm = Self("x-amz-sdk-checksum-algorithm")!
    static let amzChecksumType = Self("x-amz-checksum-type")!
    static let amzMPPartsCount = Self("x-amz-mp-parts-count")!
    static let amzBucketRegion = Self("x-amz-bucket-region")!
    static let amzAbortDate = Self("x-amz-abort-date")!
    static let contentMD5 = Self("Content-MD5")!
    static let contentLanguage = Self("Content-Language")!
    static let expires = Self("Expires")!
    static let expect = Self("Expect")!
}
