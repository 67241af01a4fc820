"""Scale-out end to end: real redis-server, replicas and HAProxy."""
