#!/usr/bin/env node
/** The `mlx5sim` executable: runs the command line (src/cli/cli.ts) and exits with its code. */
import { runCli } from './cli.ts';

// A reader that stops early (`mlx5sim list | head -1`) closes the pipe: that ends the command
// quietly, as it ends a Unix tool, not with an unhandled EPIPE and exit code 1 (read as failed checks).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
}

void runCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
