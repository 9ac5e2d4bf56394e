#!/usr/bin/env node
/** The `mlx5sim` executable: runs the command line (src/cli/cli.ts) and exits with its code. */
import { runCli } from './cli.ts';

// A reader that stops early (`mlx5sim list | head -1`) closes the pipe: that ends the command as
// SIGPIPE ends a Unix tool, quietly with 128 + 13 (Node ignores the signal and reports EPIPE),
// not with a stack and exit code 1 (read as failed checks), nor 0 (a failure would pass unseen)
const SIGPIPE_EXIT = 141;
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(SIGPIPE_EXIT);
    throw e;
  });
}

void runCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
