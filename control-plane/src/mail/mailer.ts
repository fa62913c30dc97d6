// Outgoing mail: SMTP through nodemailer when SMTP_URL is set; otherwise (development) each mail is
// written to DATA_DIR/outbox, readable by its owner only, so a developer can sign in without a mail
// server. The log says which file to open and never what is in it.
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
      const file = join(outbox, name);
      writePrivateFileAtomic(
        file,
        `From: ${from}\nTo: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n`,
      );
      // Neither the subject nor the text: they carry sign-in codes, approval codes and single-use
      // approve links, and a log travels further (collectors, CI output, support tickets).
      options.logger.warn(
        { to: mail.to, file },
        `mail written to ${file} (SMTP_URL is not set): open it there`,
      );
    },
    close: () => {},
  };
}
