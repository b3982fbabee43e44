/* SPDX-License-Identifier: MIT */
/* `rove`: the command-line tool installed with librove (info, demo, check, bench). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static int run(int argc, char **argv);

/* The command's exit code, or 1 when what it printed could not be written (a full disk,
 * a closed pipe: `rove info > /dev/full` must not report success). */
int main(int argc, char **argv) {
  const int rc = run(argc, argv);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "rove: cannot write the output\n");
    return rc == CLI_EXIT_OK ? 1 : rc;
  }
  return rc;
}

static int run(int argc, char **argv) {
  static const char *const commands[] = {"info", "demo", "check", "bench", "version", "help"};
  if (argc < 2) return cli_usage_error(NULL, "no command"); /* an error, as for a bad one */
  const char *cmd = argv[1];
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
    /* `rove help CMD` (or `help --help`, as every command's --help): the one usage text
     * covers every command */
    int known = argc == 2 ||
                (argc >= 3 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0));
    for (size_t i = 0; argc >= 3 && i < sizeof commands / sizeof commands[0]; i++)
      known |= strcmp(argv[2], commands[i]) == 0;
    if (argc > 3 || !known) /* the first argument that is not a command's name */
      return cli_usage_error("help", "unexpected argument '%s'", argv[known ? 3 : 2]);
    cli_print_usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
      cli_print_usage(stdout); /* as every other command's --help */
      return CLI_EXIT_OK;
    }
    if (argc > 2) return cli_usage_error("version", "unexpected argument '%s'", argv[2]);
    printf("rove (librove) %s\n", rove_version_string());
    return CLI_EXIT_OK;
  }
  if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
  if (strcmp(cmd, "demo") == 0) return cmd_demo(argc - 2, argv + 2);
  if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (cmd[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", cmd);
  return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
