#!/usr/bin/env python3
"""Prints JSON rows [country, capital, population] from stdin as a Markdown table."""
import json
import sys

rows = sorted(json.load(sys.stdin), key=lambda r: -r[2])
print("| country | capital | population |")
print("|---|---|---:|")
for country, capital, population in rows:
    print(f"| {country} | {capital} | {population:,} |")
