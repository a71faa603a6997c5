import FerryCore

/// Who made a request, as its route group's authentication middleware established it: the one typed principal every
/// route reads, whatever the credential (a SigV4 signature, a console session, a publish signature, an upload token).
struct Caller: Sendable {
    /// How the request proved who made it.
    enum Credential: String, Sendable, Hashable {
        /// Nothing: a browser's preflight, a POST upload that carries its own signed policy.
        case anonymous
        /// A SigV4 signature by a long-term access key (the root key or a stored one).
        case accessKey
        /// A SigV4 signature by a temporary credential (STS, an upload credential) and its session token.
        case temporaryCredential
        /// The web console's session cookie (and its CSRF token where the request changes something).
        case consoleSession
        /// A publish signature in the body of a publish request.
        case publishSignature
        /// A Qiniu-style upload token in a form upload.
        case uploadToken
    }

    /// How it proved it.
    var credential: Credential
    /// Who it is and what it may do; nil for ``Credential/anonymous``.
    var principal: Principal?
    /// What the SigV4 verification established (how the body is protected), for signed requests.
    var signedRequest: SigV4VerifiedRequest?
    /// The signature's fields, for ``Credential/publishSignature`` (its procedure, class and source context shape the
    /// video it applies for).
    var publishSignature: PublishSignature?

    /// An unauthenticated caller.
    static let anonymous = Caller(credential: .anonymous, principal: nil, signedRequest: nil)

    /// A caller that signed with SigV4.
    static func signed(_ principal: Principal, _ verified: SigV4VerifiedRequest) -> Caller {
        Caller(
            credential: principal.expiration == nil ? .accessKey : .temporaryCredential, principal: principal,
            signedRequest: verified)
    }

    /// The principal, or `anonymous` refused.
    func requirePrincipal() throws -> Principal {
        guard let principal else {
            throw FerryDomainError(.anonymous, "Anonymous access is forbidden; sign the request with AWS Signature Version 4.")
        }
        return principal
    }
}
