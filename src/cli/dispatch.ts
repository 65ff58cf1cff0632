// How kubegc's command line and kubectl gc's pick a subcommand.
import { VERSION } from '../version.ts';

export type Command = (argv: string[]) => Promise<number>;

/**
 * A command line of subcommands (kubegc's, and kubectl gc's): help, the
 * version, or the named command with the rest of the arguments.
 */
export async function dispatch(
  argv: string[],
  usage: string,
  find: (name: string) => Promise<Command>,
): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '-h' || first === '--help' || first === 'help') {
    console.log(usage);
    return first === undefined ? 2 : 0;
  }
  if (first === '--version' || first === 'version') {
    console.log(VERSION);
    return 0;
  }
  return (await find(first))(rest);
}
