"""Validates docs/openapi.yaml, then every captured media API response against its operation's schema.

Usage: validate_openapi.py SPEC CAPTURE_DIR — each capture is <Action>.<status>.json. Prints `VALID <file>` per
response; exits 1 on the first invalid one.
"""
import json
import os
import sys

import jsonschema
import yaml
from openapi_spec_validator import validate

spec_path, captures = sys.argv[1], sys.argv[2]
spec = yaml.safe_load(open(spec_path))
validate(spec)
print("VALID spec")
for name in sorted(os.listdir(captures)):
    action, status, _ = name.split(".")
    operation = spec["paths"][f"/_ferry/v1/{action}"]["post"]
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    wrapper = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": schema["$ref"], "components": spec["components"]}
    body = json.load(open(os.path.join(captures, name)))
    jsonschema.Draft202012Validator(wrapper).validate(body)
    print("VALID", name)
