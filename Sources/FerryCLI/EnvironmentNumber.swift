import ArgumentParser
import Foundation

/// The number a `FERRY_*` environment variable sets, for a flag left out.
enum EnvironmentNumber {
    /// The decimal number `name` holds in `env` (spaces around it aside), within `range`; nil when the variable is
    /// unset or empty. Any other value stops the command with the variable's name and what it takes (`must`, by
    /// default the range and `unit`): a typo such as `30s`, `1e3` or `0x10` would otherwise leave the default in force
    /// without a word.
    static func read<Number: LosslessStringConvertible & Comparable>(
        _ name: String, in range: ClosedRange<Number>, unit: String = "", must: String? = nil,
        from env: [String: String]
    ) throws -> Number? {
        guard let text = env[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        guard isPlainDecimal(text), let number = Number(text.hasPrefix(".") ? "0" + text : text), range.contains(number)
        else {
            let words = must ?? "must be between \(plain(range.lowerBound)) and \(plain(range.upperBound))\(unit)"
            throw ValidationError("\(name) \(words).")
        }
        return number
    }

    /// Digits, with a fraction after a point for a fractional setting (`.5` is 0.5).
    private static func isPlainDecimal(_ text: String) -> Bool {
        let decimal = text.split(separator: ".", omittingEmptySubsequences: false)
        return decimal.count <= 2 && decimal.last?.isEmpty == false
            && decimal.allSatisfy { $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    /// A flag's value read as the variables are: a plain decimal number. `1e3`, `0x10`, `inf` and `nan`, which
    /// Swift's own number parsing takes, are refused.
    static func decimal(_ text: String) throws -> Double {
        guard isPlainDecimal(text), let number = Double(text.hasPrefix(".") ? "0" + text : text) else {
            throw ValidationError("'\(text)' is not a decimal number (digits, with a fraction after a point).")
        }
        return number
    }

    /// `number` as written in a message: a whole number without its `.0`.
    private static func plain(_ number: some LosslessStringConvertible) -> String {
        let text = "\(number)"
        return text.hasSuffix(".0") ? String(text.dropLast(2)) : text
    }
}
