/* SPDX-License-Identifier: MIT */
/* The subcommands of `rove`. Each takes the arguments after its name and returns the
 * process exit status (see CLI_EXIT_* in common.h). */
#ifndef ROVE_CLI_COMMANDS_H
#define ROVE_CLI_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
