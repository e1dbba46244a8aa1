"""Fetches rttscope's /metrics and parses it with the official Prometheus client's text parser.

A parse error (malformed line, bad escaping, a sample outside its declared
family) fails the script. What parsed is printed as JSON, each family by name
with its declared type and every sample, for the test to check values on:

  {"content_type": the Content-Type served,
   "families": {NAME: {"type", "samples": [{"name", "labels", "value"}]}},
   "text": the exposition as served}

The parser names a counter family without its `_total` suffix; its samples keep it.
"""

import argparse
import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="http://ADMIN/metrics")
    args = p.parse_args()
    with urllib.request.urlopen(args.url, timeout=30) as reply:
        content_type = reply.headers.get("Content-Type", "")
        text = reply.read().decode("utf-8")
    families = {}
    for family in text_string_to_metric_families(text):
        if family.name in families:
            raise SystemExit("family %s declared twice" % family.name)
        families[family.name] = {
            "type": family.type,
            "samples": [{"name": s.name, "labels": dict(s.labels), "value": s.value} for s in family.samples],
        }
    print(json.dumps({"content_type": content_type, "families": families, "text": text}))


if __name__ == "__main__":
    main()
