// Outgoing mail: SMTP through nodemailer when SMTP_URL is set; otherwise (development) each mail is
// written to DATA_DIR/outbox and to the log, so a developer can sign in without a mail server.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { writePrivateFileAtomic } from "@latch/shared/files";
import nodemailer from "nodemailer";
import type { Logger } from "pino";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
  close(): void;
}

export const MAIL_FROM = "Latch <no-reply@latch.invalid>";

export function createMailer(options: {
  smtpUrl?: string | undefined;
  dataDir: string;
  logger: Logger;
  from?: string;
}): Mailer {
  const from = options.from ?? MAIL_FROM;
  if (options.smtpUrl) {
    const transport = nodemailer.createTransport(options.smtpUrl);
    return {
      async send(mail) {
        await transport.sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text });
      },
      close: () => transport.close(),
    };
  }
  const outbox = join(options.dataDir, "outbox");
  return {
    async send(mail) {
      const name = `${new Date().toISOString().replace(/[:.]/g, "-")}-${randomBytes(4).toString("hex")}.txt`;
      writePrivateFileAtomic(
        join(outbox, name),
        `From: ${from}\nTo: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n`,
      );
      options.logger.warn(
        { to: mail.to, subject: mail.subject, text: mail.text, file: name },
        "mail written to the dev outbox (SMTP_URL is not set)",
      );
    },
    close: () => {},
  };
}
