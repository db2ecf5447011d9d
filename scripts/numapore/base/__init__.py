"""The bottom layer: what every other part of numapore uses and nothing of numapore's own below
it: errors, atomic writes, rule logging, the working directory, the compiled modules and the
package's data files."""
