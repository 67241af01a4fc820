# category: secrets
# attack: prints its environment, looking for the host's secret
# expect: harmless
import os
print("secret:", os.environ.get("@@SECRET_NAME@@"))
print(dict(os.environ))
