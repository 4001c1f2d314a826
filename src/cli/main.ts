#!/usr/bin/env node
import { run } from './run.js';

process.exitCode = await run(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  // process.stdin is only touched when a command reads it (--stripe-webhook-secret -).
  stdin: { [Symbol.asyncIterator]: () => process.stdin[Symbol.asyncIterator]() },
  env: process.env,
});
