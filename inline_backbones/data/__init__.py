"""Data and tool inputs: the generated shapes dataset (`shapes`) and what the tools check before building a model
(`tool_inputs`)."""
