"""Validates captured media API request bodies against their operation's request schema in docs/openapi.yaml.

Usage: validate_openapi_requests.py SPEC CAPTURE_DIR — each capture is <Action>.request.json. A request may carry
only the properties its schema lists (additionalProperties is taken as false at the top level). Prints
`VALID <file>` per request; exits 1 on the first invalid one.
"""
import json
import os
import sys

import jsonschema
import yaml

spec_path, captures = sys.argv[1], sys.argv[2]
spec = yaml.safe_load(open(spec_path))
for name in sorted(os.listdir(captures)):
    action, kind, _ = name.split(".")
    assert kind == "request", name
    operation = spec["paths"][f"/_ferry/v1/{action}"]["post"]
    schema = dict(operation["requestBody"]["content"]["application/json"]["schema"])
    schema.setdefault("additionalProperties", False)
    wrapper = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "components": spec["components"]}
    body = json.load(open(os.path.join(captures, name)))
    try:
        jsonschema.Draft202012Validator(wrapper).validate(body)
    except jsonschema.ValidationError as error:
        print("INVALID", name, error.message)
        sys.exit(1)
    print("VALID", name)
