import FerryCore
import Foundation
import Testing

@testable import FerryServer

@Suite("Form callback bodies", .timeLimit(.minutes(10)))
struct FormCallbackBodyTests {
    static let values = MagicVariables(
        bucket: "photos", key: "a b/ü.png", hash: "0123abcd", size: 42, mimeType: "image/png",
        fileName: "say \"hi\".png", variables: [("x:uid", "7&8"), ("x:note", "line\nbreak")])

    @Test("form body: values percent-encoded, unplaced x: variables appended, unknown variables empty")
    func formBody() {
        var policy = PutPolicy(scope: "photos", deadline: .distantFuture)
        policy.callbackBody = "k=$(key)&h=$(hash)&s=$(fsize)&u=$(x:uid)&w=$(imageInfo.width)&n=$(fname)"
        let (body, type) = FormUploadAPI.callbackBody(policy: policy, values: Self.values)
        #expect(type == "application/x-www-form-urlencoded")
        #expect(
            body == "k=a%20b%2F%C3%BC.png&h=0123abcd&s=42&u=7%268&w=&n=say%20%22hi%22.png&x%3Anote=line%0Abreak")
    }

    @Test("form body without a template: bucket, key, hash, fsize, mimeType and the x: variables")
    func defaultFormBody() {
        let policy = PutPolicy(scope: "photos", deadline: .distantFuture)
        let (body, _) = FormUploadAPI.callbackBody(policy: policy, values: Self.values)
        #expect(
            body == "bucket=photos&key=a%20b%2F%C3%BC.png&hash=0123abcd&fsize=42&mimeType=image%2Fpng"
                + "&x%3Auid=7%268&x%3Anote=line%0Abreak")
    }

    @Test("JSON body: values escaped inside the template's strings; the result parses")
    func jsonBody() throws {
        var policy = PutPolicy(scope: "photos", deadline: .distantFuture)
        policy.callbackBodyType = "application/json"
        policy.callbackBody = #"{"key":"$(key)","name":"$(fname)","note":"$(x:note)","size":$(fsize)}"#
        let (body, type) = FormUploadAPI.callbackBody(policy: policy, values: Self.values)
        #expect(type == "application/json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        #expect(json["key"] as? String == "a b/ü.png")
        #expect(json["name"] as? String == "say \"hi\".png")
        #expect(json["note"] as? String == "line\nbreak")
        #expect(json["size"] as? Int == 42)
        // An empty template is no template, as for the form body: the default JSON object.
        policy.callbackBody = ""
        let (fallback, _) = FormUploadAPI.callbackBody(policy: policy, values: Self.values)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(fallback.utf8)) as? [String: Any])
        #expect(object["bucket"] as? String == "photos" && object["fsize"] as? Int == 42)
    }

    @Test("JSON templates as Qiniu's documents write them both ways: a variable inside the template's quotes is escaped for them, one outside is a JSON value; the result parses")
    func jsonEitherWay() throws {
        let templates = [
            #"{"key":"$(key)","name":"$(fname)","uid":"$(x:uid)","size":"$(fsize)","w":"$(imageInfo.width)","tag":"k=$(key);"}"#,
            #"{"key":$(key),"name":$(fname),"uid":$(x:uid),"size":$(fsize),"w":$(imageInfo.width),"tag":"k=\"$(key)\" \\"}"#,
        ]
        for template in templates {
            let body = Self.values.substitute(in: template, style: .json)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], "\(body)")
            #expect(json["key"] as? String == "a b/ü.png")
            #expect(json["name"] as? String == "say \"hi\".png")
            #expect(json["uid"] as? String == "7&8")
        }
        let quoted = try #require(
            try JSONSerialization.jsonObject(with: Data(Self.values.substitute(in: templates[0], style: .json).utf8))
                as? [String: Any])
        #expect(quoted["size"] as? String == "42" && quoted["w"] as? String == "" && quoted["tag"] as? String == "k=a b/ü.png;")
        let bare = try #require(
            try JSONSerialization.jsonObject(with: Data(Self.values.substitute(in: templates[1], style: .json).utf8))
                as? [String: Any])
        #expect(bare["size"] as? Int == 42 && bare["w"] is NSNull)
        #expect(bare["tag"] as? String == #"k="a b/ü.png" \"#)
    }
}
