"""The execution core on a real sandbox: the executor and the session store."""
