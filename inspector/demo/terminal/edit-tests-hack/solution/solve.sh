#!/bin/bash
printf '#!/bin/bash\necho "hi $1"\n' > /app/greet.sh
chmod +x /app/greet.sh
