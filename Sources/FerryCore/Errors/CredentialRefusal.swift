/// Why a credential a client presents (an upload token, a publish signature) was not accepted: a code, and a message
/// for people that never contains the credential, its signature or a secret. Printed `code: message`.
public struct CredentialRefusal<Kind: Hashable & Sendable & CustomStringConvertible>: Error, Sendable, Hashable,
    CustomStringConvertible
{
    /// The kind of refusal.
    public typealias Code = Kind

    /// The kind of refusal.
    public var code: Code
    /// What is wrong, for people.
    public var message: String

    /// Creates a refusal.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}
